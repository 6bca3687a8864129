package samlsp

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
	"github.com/russellhaering/goxmldsig/etreeutils"
)

// Limits on the shape of any XML we parse: legitimate SAML is shallow and
// small, and deep or huge trees cost the canonicaliser quadratic time.
const (
	maxXMLDepth    = 48
	maxXMLElements = 20000
)

// checkXML rejects what SAML never needs and attackers love: a DOCTYPE or any
// other directive (entity expansion, external entities), processing
// instructions past the XML declaration, and trees too deep or too large. It
// also makes sure the document is well-formed with a single root.
func checkXML(data []byte) error {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	// Refuse any charset but UTF-8 rather than guess.
	d.CharsetReader = func(label string, _ io.Reader) (io.Reader, error) {
		return nil, fmt.Errorf("unsupported XML encoding %q", label)
	}
	depth, elements, roots := 0, 0, 0
	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("malformed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return errors.New("XML directives (DOCTYPE, ENTITY) are not allowed")
		case xml.ProcInst:
			if t.Target != "xml" || elements > 0 {
				return errors.New("XML processing instructions are not allowed")
			}
		case xml.StartElement:
			if depth == 0 {
				roots++
				if roots > 1 {
					return errors.New("malformed XML: more than one root element")
				}
			}
			depth++
			elements++
			if depth > maxXMLDepth {
				return errors.New("XML nested too deeply")
			}
			if elements > maxXMLElements {
				return errors.New("XML has too many elements")
			}
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return errors.New("malformed XML: text outside the root element")
			}
		}
	}
	if roots != 1 || depth != 0 {
		return errors.New("malformed XML: no single complete root element")
	}
	return nil
}

// Namespaces of SAML 2.0, XML-DSig and XML-Enc.
const (
	nsProtocol  = "urn:oasis:names:tc:SAML:2.0:protocol"
	nsAssertion = "urn:oasis:names:tc:SAML:2.0:assertion"
	nsDSig      = "http://www.w3.org/2000/09/xmldsig#"
	nsXMLEnc    = "http://www.w3.org/2001/04/xmlenc#"
)

func is(el *etree.Element, ns, tag string) bool {
	return el != nil && el.Tag == tag && el.NamespaceURI() == ns
}

// children returns el's child elements named ns:tag.
func children(el *etree.Element, ns, tag string) []*etree.Element {
	var out []*etree.Element
	for _, c := range el.ChildElements() {
		if is(c, ns, tag) {
			out = append(out, c)
		}
	}
	return out
}

// onlyChild returns the single child named ns:tag, nil when there is none,
// and an error when there are several.
func onlyChild(el *etree.Element, ns, tag string) (*etree.Element, error) {
	cs := children(el, ns, tag)
	switch len(cs) {
	case 0:
		return nil, nil
	case 1:
		return cs[0], nil
	}
	return nil, fmt.Errorf("%d %s elements where one is allowed", len(cs), tag)
}

// walk calls f for el and every element below it.
func walk(el *etree.Element, f func(*etree.Element)) {
	f(el)
	for _, c := range el.ChildElements() {
		walk(c, f)
	}
}

// text returns the concatenation of every text node directly inside el, so
// that a comment splitting a value ("a<!---->b") can never shorten it.
func text(el *etree.Element) string {
	if el == nil {
		return ""
	}
	var b strings.Builder
	for _, t := range el.Child {
		if cd, ok := t.(*etree.CharData); ok {
			b.WriteString(cd.Data)
		}
	}
	return strings.TrimSpace(b.String())
}

// detach returns a copy of el that declares every namespace it inherits, so
// it can be serialized or verified on its own.
func detach(el *etree.Element) (*etree.Element, error) {
	ctx, err := etreeutils.NSBuildParentContext(el)
	if err != nil {
		return nil, err
	}
	ctx, err = ctx.SubContext(el)
	if err != nil {
		return nil, err
	}
	return etreeutils.NSDetatch(ctx, el)
}

// unmarshalElement decodes el into v through encoding/xml.
func unmarshalElement(el *etree.Element, v any) error {
	det, err := detach(el)
	if err != nil {
		return err
	}
	doc := etree.NewDocument()
	doc.SetRoot(det)
	buf, err := doc.WriteToBytes()
	if err != nil {
		return err
	}
	return xml.Unmarshal(buf, v)
}

// removeKeyInfo strips KeyInfo from el's own Signature: the key must come
// from the IdP's metadata, never from the message.
func removeKeyInfo(el *etree.Element) {
	for _, sig := range el.ChildElements() {
		if sig.Tag != dsig.SignatureTag {
			continue
		}
		for _, ki := range sig.ChildElements() {
			if ki.Tag == dsig.KeyInfoTag {
				sig.RemoveChild(ki)
			}
		}
	}
}
