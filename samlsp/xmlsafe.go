package samlsp

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/beevik/etree"
)

// Limits on the shape of any XML we parse: legitimate SAML is shallow and
// small, and deep or huge trees cost the canonicaliser quadratic time.
const (
	maxXMLDepth    = 48
	maxXMLElements = 20000
)

// Namespaces of SAML 2.0, XML-DSig, XML-Enc 1.0 and 1.1.
const (
	nsProtocol  = "urn:oasis:names:tc:SAML:2.0:protocol"
	nsAssertion = "urn:oasis:names:tc:SAML:2.0:assertion"
	nsMetadata  = "urn:oasis:names:tc:SAML:2.0:metadata"
	nsDSig      = "http://www.w3.org/2000/09/xmldsig#"
	nsXMLEnc    = "http://www.w3.org/2001/04/xmlenc#"
	nsXMLEnc11  = "http://www.w3.org/2009/xmlenc11#"
	nsXMLNS     = "http://www.w3.org/2000/xmlns/"
	nsXML       = "http://www.w3.org/XML/1998/namespace"
)

// parseXML is the one parser of untrusted SAML XML: every message and
// document goes through it once, and every later check reads the tree it
// returns. It refuses what SAML never needs and attackers love: a DOCTYPE or
// any other directive (entity expansion, external entities), processing
// instructions past the XML declaration, encodings other than UTF-8, trees
// too deep or too large, text or a second element beside the root.
//
// It also refuses XML that is well-formed but not namespace-well-formed
// (Namespaces in XML 1.0, section 7): names with more than one colon, an
// undeclared prefix, a prefix undeclared with xmlns:p="", an attribute
// given twice (also under two prefixes bound to one namespace). Those are
// the constructs on which XML libraries disagree, and which Go's
// encoding/xml does not keep stable through a round trip (CVE-2020-29509,
// CVE-2020-29511): refusing them here is what lets us do without a second,
// round-trip validating pass over the input. Namespace resolution itself
// follows XML scoping exactly: etree resolves each prefix at the element
// that uses it, walking out through its ancestors.
func parseXML(data []byte) (*etree.Element, error) {
	doc := etree.NewDocument()
	doc.ReadSettings = etree.ReadSettings{
		CharsetReader: func(label string, _ io.Reader) (io.Reader, error) {
			return nil, fmt.Errorf("unsupported XML encoding %q", label)
		},
		// Keep repeated attributes so that the check below sees and refuses
		// them, instead of etree silently keeping the last one.
		PreserveDuplicateAttrs: true,
		MaxDepth:               maxXMLDepth,
	}
	if err := doc.ReadFromBytes(data); err != nil {
		if errors.Is(err, etree.ErrMaxDepth) {
			return nil, errors.New("XML nested too deeply")
		}
		return nil, fmt.Errorf("malformed XML: %w", err)
	}
	var root *etree.Element
	for i, tok := range doc.Child {
		switch t := tok.(type) {
		case *etree.Element:
			if root != nil {
				return nil, errors.New("malformed XML: more than one root element")
			}
			root = t
		case *etree.CharData:
			if strings.TrimSpace(t.Data) != "" {
				return nil, errors.New("malformed XML: text outside the root element")
			}
		case *etree.ProcInst:
			if t.Target != "xml" || i != 0 {
				return nil, errors.New("XML processing instructions are not allowed")
			}
		case *etree.Directive:
			return nil, errors.New("XML directives (DOCTYPE, ENTITY) are not allowed")
		}
	}
	if root == nil {
		return nil, errors.New("malformed XML: no root element")
	}
	if err := checkTree(root); err != nil {
		return nil, err
	}
	return root, nil
}

// checkTree applies parseXML's rules to every element below and including
// root.
func checkTree(root *etree.Element) error {
	elements := 0
	stack := []*etree.Element{root}
	for len(stack) > 0 {
		el := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		elements++
		if elements > maxXMLElements {
			return errors.New("XML has too many elements")
		}
		if err := checkElement(el); err != nil {
			return err
		}
		for _, tok := range el.Child {
			switch t := tok.(type) {
			case *etree.Element:
				stack = append(stack, t)
			case *etree.ProcInst:
				return errors.New("XML processing instructions are not allowed")
			case *etree.Directive:
				return errors.New("XML directives (DOCTYPE, ENTITY) are not allowed")
			}
		}
	}
	return nil
}

// checkElement checks the names, namespace declarations and attributes of
// one element.
func checkElement(el *etree.Element) error {
	if !ncName(el.Tag) || (el.Space != "" && !ncName(el.Space)) {
		return fmt.Errorf("XML name %q is not namespace-well-formed", qname(el.Space, el.Tag))
	}
	if el.Space == "xmlns" || (el.Space != "" && el.Space != "xml" && el.NamespaceURI() == "") {
		return fmt.Errorf("XML element %q uses an undeclared prefix", qname(el.Space, el.Tag))
	}
	for i, a := range el.Attr {
		if !ncName(a.Key) || (a.Space != "" && !ncName(a.Space)) {
			return fmt.Errorf("XML attribute name %q is not namespace-well-formed", qname(a.Space, a.Key))
		}
		switch {
		case a.Space == "xmlns":
			// xmlns:p="" is XML 1.1 only; xml and xmlns are fixed.
			if a.Value == "" || a.Key == "xmlns" || (a.Key == "xml") != (a.Value == nsXML) || a.Value == nsXMLNS {
				return fmt.Errorf("XML namespace declaration xmlns:%s=%q is not allowed", a.Key, a.Value)
			}
		case a.Space == "" && a.Key == "xmlns":
			if a.Value == nsXML || a.Value == nsXMLNS {
				return fmt.Errorf("XML default namespace %q is not allowed", a.Value)
			}
		case a.Space != "" && a.Space != "xml" && lookupPrefix(el, a.Space) == "":
			return fmt.Errorf("XML attribute %q uses an undeclared prefix", qname(a.Space, a.Key))
		}
		for _, b := range el.Attr[:i] {
			if b.Key == a.Key && (b.Space == a.Space || (a.Space != "" && b.Space != "" &&
				a.Space != "xmlns" && b.Space != "xmlns" && lookupPrefix(el, a.Space) == lookupPrefix(el, b.Space))) {
				return fmt.Errorf("XML attribute %q given twice", qname(a.Space, a.Key))
			}
		}
	}
	return nil
}

// ncName reports whether s can be a prefix or local name: not empty,
// without a colon, and starting with a letter or '_' (Go's decoder checks
// the other characters, but lets a name start with a digit, '-' or '.',
// which no other parser and not Go's own encoder accepts).
func ncName(s string) bool {
	if s == "" || strings.Contains(s, ":") {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r)
}

func qname(space, local string) string {
	if space == "" {
		return local
	}
	return space + ":" + local
}
