package samlidp

import (
	"fmt"

	"github.com/beevik/etree"
)

// NamespaceStyle is how a forged response names its namespaces. XML lets
// an IdP pick any prefixes, bind them anywhere and rebind them deeper down;
// an SP must resolve each one by XML scoping, never by its spelling.
type NamespaceStyle int

// The styles.
const (
	// NSUsual is crewjam's: saml:, samlp:, ds:, xenc: declared once.
	NSUsual NamespaceStyle = iota
	// NSRebound names every element with ns0: or ns1:, alternating with
	// depth, and declares a prefix only where its in-scope binding is not
	// the element's namespace: each prefix is rebound at nearly every
	// depth, inside signatures and EncryptedData too (where crewjam's
	// decryption fails).
	NSRebound
	// NSDefault uses no prefixes: the default namespace is redeclared
	// wherever it changes.
	NSDefault
	// NSMixed uses the default namespace at even depths and ns0: at odd
	// ones, and adds decoys: ns0 bound to an unrelated namespace on
	// elements that do not use it, and the default namespace redeclared on
	// prefixed elements, so that a prefix copied to the wrong element means
	// something else.
	NSMixed
)

// String names the style, for test names.
func (s NamespaceStyle) String() string {
	return [...]string{"usual", "rebound", "default", "mixed"}[s]
}

// prefixAt is the prefix an element at depth gets ("" is the default
// namespace); ok is false for NSUsual, which keeps crewjam's.
func (s NamespaceStyle) prefixAt(depth int) (prefix string, ok bool) {
	switch s {
	case NSRebound:
		return fmt.Sprintf("ns%d", depth%2), true
	case NSDefault:
		return "", true
	case NSMixed:
		if depth%2 == 0 {
			return "", true
		}
		return "ns0", true
	}
	return "", false
}

// signOptions makes a signature at depth follow the style. The signature
// is signed before it is placed, so its one prefix covers its subtree.
func (s NamespaceStyle) signOptions(depth int, o SignOptions) SignOptions {
	if p, ok := s.prefixAt(depth); ok {
		o.Prefix, o.Default = p, p == ""
	}
	return o
}

// restyle renames the element prefixes of el's subtree, el standing at
// depth, by style, given the bindings scope in force at el's parent
// (prefix "" is the default namespace). Declarations of prefixes that only
// attributes use (xsi:, xs:) are kept as they are.
func restyle(el *etree.Element, style NamespaceStyle, depth int, scope map[string]string) {
	if _, ok := style.prefixAt(0); !ok {
		return
	}
	uris := map[*etree.Element]string{}
	used := map[string]bool{}
	var record func(*etree.Element)
	record = func(e *etree.Element) {
		uris[e] = e.NamespaceURI()
		used[e.Space] = true
		for _, c := range e.ChildElements() {
			record(c)
		}
	}
	record(el)
	var strip func(*etree.Element)
	strip = func(e *etree.Element) {
		kept := e.Attr[:0]
		for _, a := range e.Attr {
			if (a.Space == "xmlns" && used[a.Key]) || (a.Space == "" && a.Key == "xmlns") {
				continue
			}
			kept = append(kept, a)
		}
		e.Attr = kept
		for _, c := range e.ChildElements() {
			strip(c)
		}
	}
	strip(el)
	var assign func(e *etree.Element, depth int, scope map[string]string)
	assign = func(e *etree.Element, depth int, scope map[string]string) {
		prefix, _ := style.prefixAt(depth)
		inner := copyScope(scope)
		bind := func(p, uri string) {
			if inner[p] == uri {
				return
			}
			inner[p] = uri
			if p == "" {
				e.CreateAttr("xmlns", uri)
			} else {
				e.CreateAttr("xmlns:"+p, uri)
			}
		}
		if style == NSMixed {
			// Decoys first, so that the element's own binding overrides.
			if prefix == "" {
				bind("ns0", fmt.Sprintf("urn:decoy:%d", depth))
			} else {
				bind("", fmt.Sprintf("urn:decoy:%d", depth))
			}
		}
		bind(prefix, uris[e])
		e.Space = prefix
		for _, c := range e.ChildElements() {
			assign(c, depth+1, inner)
		}
	}
	assign(el, depth, scope)
}

func copyScope(s map[string]string) map[string]string {
	out := make(map[string]string, len(s)+1)
	for k, v := range s {
		out[k] = v
	}
	return out
}

// scopeAt returns the namespace bindings in force at el (its own
// declarations included), prefix "" for the default namespace.
func scopeAt(el *etree.Element) map[string]string {
	var chain []*etree.Element
	for e := el; e != nil; e = e.Parent() {
		chain = append(chain, e)
	}
	scope := map[string]string{}
	for i := len(chain) - 1; i >= 0; i-- {
		for _, a := range chain[i].Attr {
			switch {
			case a.Space == "xmlns":
				scope[a.Key] = a.Value
			case a.Space == "" && a.Key == "xmlns":
				scope[""] = a.Value
			}
		}
	}
	return scope
}
