package oidfed

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Policy is a metadata_policy claim (6.1): entity type, then metadata
// parameter, then operator and its value, as JSON decodes them.
type Policy map[string]map[string]map[string]any

// The standard operators (6.1.3.1), in their order of application.
const (
	OpValue      = "value"
	OpAdd        = "add"
	OpDefault    = "default"
	OpOneOf      = "one_of"
	OpSubsetOf   = "subset_of"
	OpSupersetOf = "superset_of"
	OpEssential  = "essential"
)

var operators = []string{OpValue, OpAdd, OpDefault, OpOneOf, OpSubsetOf, OpSupersetOf, OpEssential}

// ErrPolicy is wrapped by every policy error: an operator of the wrong
// type, a combination the specification forbids, a merge that fails, or
// metadata the resolved policy refuses.
var ErrPolicy = errors.New("policy error")

func policyError(typ, param, format string, args ...any) error {
	return fmt.Errorf("%w: %s.%s: %s", ErrPolicy, typ, param, fmt.Sprintf(format, args...))
}

// validate checks every parameter policy: operator values of the types
// the operators take, allowed combinations, and every critical operator
// (crit, metadata_policy_crit) understood. Operators that are neither
// standard nor critical are ignored, as 6.1.3.2 requires.
func (p Policy) validate(crit []string) error {
	for _, c := range crit {
		if slices.Contains(operators, c) {
			return fmt.Errorf("%w: metadata_policy_crit names the standard operator %q", ErrPolicy, c)
		}
	}
	for _, typ := range sortedKeys(p) {
		for _, param := range sortedKeys(p[typ]) {
			ops := p[typ][param]
			for op := range ops {
				if !slices.Contains(operators, op) && slices.Contains(crit, op) {
					return policyError(typ, param, "the critical operator %.60q is not understood", op)
				}
			}
			if err := checkOperators(typ, param, ops); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkOperators checks the operator values' types and their combinations
// in one parameter policy.
func checkOperators(typ, param string, ops map[string]any) error {
	for _, op := range []string{OpAdd, OpOneOf, OpSubsetOf, OpSupersetOf} {
		if v, ok := ops[op]; ok {
			if _, isList := asList(param, v); !isList {
				return policyError(typ, param, "%s must be an array", op)
			}
		}
	}
	if v, ok := ops[OpDefault]; ok && v == nil {
		return policyError(typ, param, "default must not be null")
	}
	if v, ok := ops[OpEssential]; ok {
		if _, isBool := v.(bool); !isBool {
			return policyError(typ, param, "essential must be true or false")
		}
	}
	has := func(op string) bool { _, ok := ops[op]; return ok }
	list := func(op string) []any { l, _ := asList(param, ops[op]); return l }
	if has(OpOneOf) {
		for _, other := range []string{OpAdd, OpSubsetOf, OpSupersetOf} {
			if has(other) {
				return policyError(typ, param, "one_of cannot be combined with %s", other)
			}
		}
	}
	if has(OpValue) {
		v := ops[OpValue]
		vl, vIsList := asList(param, v)
		switch {
		case v == nil && has(OpDefault):
			return policyError(typ, param, "value null cannot be combined with default")
		case v == nil && ops[OpEssential] == true:
			return policyError(typ, param, "value null cannot be combined with essential true")
		case has(OpAdd) && (!vIsList || !subset(list(OpAdd), vl)):
			return policyError(typ, param, "the values of add must be a subset of value")
		case has(OpOneOf) && !slices.ContainsFunc(list(OpOneOf), func(x any) bool { return equal(x, v) }):
			return policyError(typ, param, "value must be one of one_of")
		case has(OpSubsetOf) && v != nil && (!vIsList || !subset(vl, list(OpSubsetOf))):
			return policyError(typ, param, "the values of value must be a subset of subset_of")
		case has(OpSupersetOf) && v != nil && (!vIsList || !subset(list(OpSupersetOf), vl)):
			return policyError(typ, param, "the values of value must be a superset of superset_of")
		}
	}
	if has(OpAdd) && has(OpSubsetOf) && !subset(list(OpAdd), list(OpSubsetOf)) {
		return policyError(typ, param, "the values of add must be a subset of subset_of")
	}
	if has(OpSubsetOf) && has(OpSupersetOf) && !subset(list(OpSupersetOf), list(OpSubsetOf)) {
		return policyError(typ, param, "the values of subset_of must be a superset of superset_of")
	}
	return nil
}

// Merge returns the policy of superior then sub, sub being the next
// subordinate statement's (6.1.4.1): entity types and parameters copied
// where one side has none, each operator's values merged by its rule, and
// the merged parameter policies checked for allowed combinations again. A
// subordinate can only narrow what its superiors allow: a value or
// default that differs, or one_of values that share nothing, fail.
func Merge(superior, sub Policy) (Policy, error) {
	out := Policy{}
	for typ, params := range superior {
		out[typ] = map[string]map[string]any{}
		for param, ops := range params {
			out[typ][param] = standardOnly(ops)
		}
	}
	for _, typ := range sortedKeys(sub) {
		if out[typ] == nil {
			out[typ] = map[string]map[string]any{}
		}
		for _, param := range sortedKeys(sub[typ]) {
			cur := out[typ][param]
			if cur == nil {
				out[typ][param] = standardOnly(sub[typ][param])
				continue
			}
			for _, op := range operators {
				next, ok := sub[typ][param][op]
				if !ok {
					continue
				}
				prev, had := cur[op]
				if !had {
					cur[op] = next
					continue
				}
				merged, err := mergeOperator(typ, param, op, prev, next)
				if err != nil {
					return nil, err
				}
				cur[op] = merged
			}
			if err := checkOperators(typ, param, cur); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// standardOnly copies the standard operators of a parameter policy: the
// others were either understood critical operators (none, today) or are
// ignored.
func standardOnly(ops map[string]any) map[string]any {
	out := make(map[string]any, len(ops))
	for op, v := range ops {
		if slices.Contains(operators, op) {
			out[op] = v
		}
	}
	return out
}

func mergeOperator(typ, param, op string, prev, next any) (any, error) {
	pl, _ := asList(param, prev)
	nl, _ := asList(param, next)
	switch op {
	case OpValue, OpDefault:
		if !equal(prev, next) {
			return nil, policyError(typ, param, "a subordinate's %s differs from its superior's", op)
		}
		return prev, nil
	case OpAdd, OpSupersetOf:
		return union(pl, nl), nil
	case OpOneOf:
		i := intersection(pl, nl)
		if len(i) == 0 {
			return nil, policyError(typ, param, "one_of of a subordinate shares no value with its superior's")
		}
		return i, nil
	case OpSubsetOf:
		return intersection(pl, nl), nil
	case OpEssential:
		return prev == true || next == true, nil
	}
	return prev, nil
}

// Apply applies the resolved policy of an entity type to its metadata,
// returning the resolved metadata (6.1.4.2): each parameter's operators in
// their order (value, add, default, one_of, subset_of, superset_of,
// essential). metadata is not modified.
func (p Policy) Apply(typ string, metadata map[string]any) (map[string]any, error) {
	out := maps.Clone(metadata)
	if out == nil {
		out = map[string]any{}
	}
	for _, param := range sortedKeys(p[typ]) {
		ops := p[typ][param]
		cur, present := out[param]
		if present && param == "scope" {
			if s, ok := cur.(string); ok {
				cur = anyList(strings.Fields(s))
			}
		}
		for _, op := range operators {
			v, ok := ops[op]
			if !ok {
				continue
			}
			l, _ := asList(param, v)
			switch op {
			case OpValue:
				if v == nil {
					cur, present = nil, false
				} else {
					cur, present = normalize(param, v), true
				}
			case OpAdd:
				if !present {
					cur, present = l, true
					continue
				}
				cl, isList := cur.([]any)
				if !isList {
					return nil, policyError(typ, param, "add needs an array, the metadata has %s", kind(cur))
				}
				cur = union(cl, l)
			case OpDefault:
				if !present {
					cur, present = normalize(param, v), true
				}
			case OpOneOf:
				if present && !slices.ContainsFunc(l, func(x any) bool { return equal(x, cur) }) {
					return nil, policyError(typ, param, "the metadata value is not one of one_of")
				}
			case OpSubsetOf:
				if present {
					cl, isList := cur.([]any)
					if !isList {
						return nil, policyError(typ, param, "subset_of needs an array, the metadata has %s", kind(cur))
					}
					cur = intersection(cl, l)
				}
			case OpSupersetOf:
				if present {
					cl, isList := cur.([]any)
					if !isList {
						return nil, policyError(typ, param, "superset_of needs an array, the metadata has %s", kind(cur))
					}
					if !subset(l, cl) {
						return nil, policyError(typ, param, "the metadata values are not a superset of superset_of")
					}
				}
			case OpEssential:
				if v == true && !present {
					return nil, policyError(typ, param, "is essential and missing")
				}
			}
		}
		if !present {
			delete(out, param)
			continue
		}
		if param == "scope" {
			if l, ok := cur.([]any); ok {
				words := make([]string, 0, len(l))
				for _, w := range l {
					s, _ := w.(string)
					words = append(words, s)
				}
				cur = strings.Join(words, " ")
			}
		}
		out[param] = cur
	}
	return out, nil
}

// normalize returns a value of the scope parameter, a space-separated
// string, as the array the operators work on (6.1.3.1.8).
func normalize(param string, v any) any {
	if param == "scope" {
		if s, ok := v.(string); ok {
			return anyList(strings.Fields(s))
		}
	}
	return v
}

// asList returns v as an array, the scope's string as its words.
func asList(param string, v any) ([]any, bool) {
	v = normalize(param, v)
	l, ok := v.([]any)
	return l, ok
}

func anyList(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// equal compares two JSON values; arrays as sets, since the order of a
// merged operator's values is not defined (6.1.2).
func equal(a, b any) bool {
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		return subset(al, bl) && subset(bl, al)
	}
	return reflect.DeepEqual(a, b)
}

func contains(l []any, x any) bool {
	return slices.ContainsFunc(l, func(y any) bool { return reflect.DeepEqual(x, y) })
}

func subset(a, b []any) bool {
	for _, x := range a {
		if !contains(b, x) {
			return false
		}
	}
	return true
}

// union keeps a's order, then b's values a lacks.
func union(a, b []any) []any {
	out := slices.Clone(a)
	if out == nil {
		out = []any{}
	}
	for _, x := range b {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// intersection keeps a's order.
func intersection(a, b []any) []any {
	out := []any{}
	for _, x := range a {
		if contains(b, x) && !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	}
	return "another type"
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
