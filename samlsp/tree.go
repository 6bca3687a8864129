package samlsp

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/beevik/etree"
)

// is reports whether el is the element ns:tag, its namespace resolved by
// XML scoping (whatever prefix, or none, names it).
func is(el *etree.Element, ns, tag string) bool {
	return el != nil && el.Tag == tag && el.NamespaceURI() == ns
}

// lookupPrefix returns the namespace bound to prefix at el, "" when none is.
func lookupPrefix(el *etree.Element, prefix string) string {
	for e := el; e != nil; e = e.Parent() {
		for _, a := range e.Attr {
			if a.Space == "xmlns" && a.Key == prefix {
				return a.Value
			}
		}
	}
	return ""
}

// children returns el's child elements named ns:tag.
func children(el *etree.Element, ns, tag string) []*etree.Element {
	var out []*etree.Element
	for _, t := range el.Child {
		if c, ok := t.(*etree.Element); ok && is(c, ns, tag) {
			out = append(out, c)
		}
	}
	return out
}

// onlyChild returns the single child named ns:tag, nil when there is none,
// and an error when there are several.
func onlyChild(el *etree.Element, ns, tag string) (*etree.Element, error) {
	var found *etree.Element
	for _, t := range el.Child {
		if c, ok := t.(*etree.Element); ok && is(c, ns, tag) {
			if found != nil {
				return nil, fmt.Errorf("several %s elements where one is allowed", tag)
			}
			found = c
		}
	}
	return found, nil
}

// oneChild is onlyChild for a child that must be there.
func oneChild(el *etree.Element, ns, tag string) (*etree.Element, error) {
	c, err := onlyChild(el, ns, tag)
	if err == nil && c == nil {
		err = fmt.Errorf("%s has no %s", el.Tag, tag)
	}
	return c, err
}

// walk calls f for el and every element below it, in document order; f
// returning false prunes the element's subtree.
func walk(el *etree.Element, f func(*etree.Element) bool) {
	if !f(el) {
		return
	}
	for _, t := range el.Child {
		if c, ok := t.(*etree.Element); ok {
			walk(c, f)
		}
	}
}

// text returns the concatenation of every text node directly inside el, so
// that a comment splitting a value ("a<!---->b") can never shorten it.
func text(el *etree.Element) string {
	if el == nil {
		return ""
	}
	var only string
	n := 0
	for _, t := range el.Child {
		if cd, ok := t.(*etree.CharData); ok {
			only = cd.Data
			n++
		}
	}
	if n <= 1 {
		return strings.TrimSpace(only)
	}
	var b strings.Builder
	for _, t := range el.Child {
		if cd, ok := t.(*etree.CharData); ok {
			b.WriteString(cd.Data)
		}
	}
	return strings.TrimSpace(b.String())
}

// attr returns the value of el's unqualified attribute key. SAML's own
// attributes are never namespace-qualified; etree's SelectAttrValue would
// also match p:key.
func attr(el *etree.Element, key string) string {
	for _, a := range el.Attr {
		if a.Space == "" && a.Key == key {
			return a.Value
		}
	}
	return ""
}

// timeAttr parses the xs:dateTime attribute key of el; ok is false when it
// is absent, err set when it is malformed.
func timeAttr(el *etree.Element, key string) (t time.Time, ok bool, err error) {
	v := attr(el, key)
	if v == "" {
		return time.Time{}, false, nil
	}
	// SAML Core 1.3.3: xs:dateTime in UTC. The layout also accepts
	// fractional seconds.
	t, err = time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%s %s is not a valid time", el.Tag, key)
	}
	return t, true, nil
}

// declareInScope adds to el the namespace declarations it inherits, so that
// a copy of el alone (goxmldsig copies what it verifies) means what el means
// in its document. Declarations already in scope change nothing there.
func declareInScope(el *etree.Element) {
	declared := func(space, key string) bool {
		for _, a := range el.Attr {
			if a.Space == space && a.Key == key {
				return true
			}
		}
		return false
	}
	for p := el.Parent(); p != nil; p = p.Parent() {
		for _, a := range p.Attr {
			switch {
			case a.Space == "xmlns" && !declared("xmlns", a.Key):
				el.CreateAttr("xmlns:"+a.Key, a.Value)
			case a.Space == "" && a.Key == "xmlns" && !declared("", "xmlns"):
				el.CreateAttr("xmlns", a.Value)
			}
		}
	}
}

var errNotSigned = errors.New("not signed")

// reusedID records el's ID in ids and reports whether an element seen
// before had it: a message that gives one ID to two elements lets a
// reference name another element than the one checked (signature
// wrapping), so every check of a message's shape refuses it.
func reusedID(ids map[string]bool, el *etree.Element) bool {
	id := attr(el, "ID")
	if id == "" {
		return false
	}
	seen := ids[id]
	ids[id] = true
	return seen
}
