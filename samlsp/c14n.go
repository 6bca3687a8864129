package samlsp

import (
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"slices"
)

// excC14N streams the Exclusive XML Canonicalization 1.0 (without
// comments, https://www.w3.org/TR/xml-exc-c14n/) of one element's subtree
// into a hash, fed token by token as encoding/xml's RawToken reads them,
// so that a signed document of any size is digested without a tree of it.
// No library canonicalizes a token stream: goxmldsig canonicalizes an etree
// tree, which for a 70 MB federation aggregate is several times its size.
//
// It keeps the namespace scope itself (RawToken does not resolve
// prefixes), for every element fed to it, omitted ones included, and
// renders each element as the recommendation says: the namespace
// declarations its name and attributes visibly use (and those of the
// InclusiveNamespaces PrefixList) that the nearest output ancestor has not
// rendered with the same value, sorted by prefix; the attributes sorted by
// namespace URI, then local name; text and attribute values escaped as
// canonical XML escapes them; empty elements as start and end tag. A
// subtree fed with omit (the enveloped signature) leaves no trace in the
// output. Attribute values must come normalized as a validating parser
// would (see normalizeRawAttrs): encoding/xml does not replace white space
// in them.
type excC14N struct {
	out       []byte
	h         hash.Hash
	inclusive []string
	frames    []c14nFrame
	// omitDepth is the depth inside an omitted subtree, 0 outside one.
	omitDepth int
	serial    int
	// attrs and binds are scratch space reused from element to element.
	attrs []c14nAttr
	binds []nsBind
}

// nsBind is a namespace declaration: prefix "" is the default namespace.
type nsBind struct{ prefix, uri string }

type c14nFrame struct {
	name xml.Name
	// decls are the declarations made on the element as written;
	// rendered those its canonical form carries.
	decls, rendered []nsBind
	omitted         bool
	// serial tells apart the elements that occupy one depth in turn.
	serial int
}

type c14nAttr struct {
	uri string
	a   xml.Attr
}

// c14nFlush is how much canonical output is gathered before it is hashed.
const c14nFlush = 32 << 10

// newExcC14N writes into h; prefixList is the InclusiveNamespaces PrefixList
// of the transform ("#default" names the default namespace).
func newExcC14N(h hash.Hash, prefixList []string) *excC14N {
	c := &excC14N{h: h, out: make([]byte, 0, c14nFlush+4096)}
	for _, p := range prefixList {
		if p == "#default" {
			p = ""
		}
		c.inclusive = append(c.inclusive, p)
	}
	return c
}

// lookup returns the namespace bound to prefix in the current scope, ""
// when none is (for "", when the default namespace is none).
func (c *excC14N) lookup(prefix string) string {
	if prefix == "xml" {
		return nsXML
	}
	for i := len(c.frames) - 1; i >= 0; i-- {
		for _, b := range c.frames[i].decls {
			if b.prefix == prefix {
				return b.uri
			}
		}
	}
	return ""
}

// rendered returns the value the nearest output ancestor rendered for
// prefix.
func (c *excC14N) rendered(prefix string) (string, bool) {
	for i := len(c.frames) - 1; i >= 0; i-- {
		if c.frames[i].omitted {
			continue
		}
		for _, b := range c.frames[i].rendered {
			if b.prefix == prefix {
				return b.uri, true
			}
		}
	}
	return "", false
}

// depth is the number of open elements.
func (c *excC14N) depth() int { return len(c.frames) }

// start opens an element. With omit, it and its subtree are left out of
// the output (their namespace declarations still scope their content).
func (c *excC14N) start(name xml.Name, attrs []xml.Attr, omit bool) error {
	var decls []nsBind
	for _, a := range attrs {
		switch {
		case a.Name.Space == "xmlns":
			decls = append(decls, nsBind{a.Name.Local, a.Value})
		case a.Name.Space == "" && a.Name.Local == "xmlns":
			decls = append(decls, nsBind{"", a.Value})
		}
	}
	c.serial++
	c.frames = append(c.frames, c14nFrame{name: name, decls: decls, serial: c.serial})
	f := &c.frames[len(c.frames)-1]
	if omit || c.omitDepth > 0 {
		c.omitDepth++
		f.omitted = true
		return nil
	}

	// The prefixes to consider: those the element visibly uses, and those
	// of the PrefixList in scope.
	binds := c.binds[:0]
	consider := func(p string) {
		for _, b := range binds {
			if b.prefix == p {
				return
			}
		}
		binds = append(binds, nsBind{prefix: p})
	}
	consider(name.Space)
	for _, a := range attrs {
		if s := a.Name.Space; s != "" && s != "xmlns" && s != "xml" {
			consider(s)
		}
	}
	for _, p := range c.inclusive {
		if p == "" || c.lookup(p) != "" {
			consider(p)
		}
	}
	n := 0
	for _, b := range binds {
		if b.prefix == "xml" {
			continue
		}
		v := c.lookup(b.prefix)
		if b.prefix != "" && v == "" {
			return fmt.Errorf("XML prefix %q is not declared", b.prefix)
		}
		r, ok := c.rendered(b.prefix)
		if b.prefix == "" {
			// xmlns="" only undoes a default an output ancestor rendered.
			if !((ok && r != v) || (!ok && v != "")) {
				continue
			}
		} else if ok && r == v {
			continue
		}
		binds[n] = nsBind{b.prefix, v}
		n++
	}
	binds = binds[:n]
	slices.SortFunc(binds, func(a, b nsBind) int { return cmp.Compare(a.prefix, b.prefix) })
	if len(binds) > 0 {
		f.rendered = slices.Clone(binds)
	}
	c.binds = binds

	as := c.attrs[:0]
	for _, a := range attrs {
		if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
			continue
		}
		uri := ""
		if a.Name.Space != "" {
			uri = c.lookup(a.Name.Space)
		}
		as = append(as, c14nAttr{uri, a})
	}
	slices.SortFunc(as, func(x, y c14nAttr) int {
		if r := cmp.Compare(x.uri, y.uri); r != 0 {
			return r
		}
		return cmp.Compare(x.a.Name.Local, y.a.Name.Local)
	})
	c.attrs = as

	c.out = append(c.out, '<')
	c.out = appendQName(c.out, name)
	for _, b := range binds {
		if b.prefix == "" {
			c.out = append(c.out, ` xmlns="`...)
		} else {
			c.out = append(c.out, " xmlns:"...)
			c.out = append(c.out, b.prefix...)
			c.out = append(c.out, `="`...)
		}
		c.out = appendC14NAttr(c.out, b.uri)
		c.out = append(c.out, '"')
	}
	for _, a := range as {
		c.out = append(c.out, ' ')
		c.out = appendQName(c.out, a.a.Name)
		c.out = append(c.out, `="`...)
		c.out = appendC14NAttr(c.out, a.a.Value)
		c.out = append(c.out, '"')
	}
	c.out = append(c.out, '>')
	c.flush(false)
	return nil
}

// end closes the innermost element.
func (c *excC14N) end() error {
	if len(c.frames) == 0 {
		return errors.New("malformed XML: an end tag without its start")
	}
	f := c.frames[len(c.frames)-1]
	c.frames = c.frames[:len(c.frames)-1]
	if f.omitted {
		c.omitDepth--
		return nil
	}
	c.out = append(c.out, "</"...)
	c.out = appendQName(c.out, f.name)
	c.out = append(c.out, '>')
	c.flush(false)
	return nil
}

// text writes character data (CDATA sections included: canonical XML
// writes their content as text).
func (c *excC14N) text(b []byte) {
	if c.omitDepth > 0 || len(c.frames) == 0 {
		return
	}
	for _, ch := range b {
		switch ch {
		case '&':
			c.out = append(c.out, "&amp;"...)
		case '<':
			c.out = append(c.out, "&lt;"...)
		case '>':
			c.out = append(c.out, "&gt;"...)
		case '\r':
			c.out = append(c.out, "&#xD;"...)
		default:
			c.out = append(c.out, ch)
		}
	}
	c.flush(false)
}

// procInst writes a processing instruction inside the element.
func (c *excC14N) procInst(target string, inst []byte) {
	if c.omitDepth > 0 || len(c.frames) == 0 {
		return
	}
	c.out = append(c.out, "<?"...)
	c.out = append(c.out, target...)
	if len(inst) > 0 {
		c.out = append(c.out, ' ')
		c.out = append(c.out, inst...)
	}
	c.out = append(c.out, "?>"...)
	c.flush(false)
}

// flush hashes the gathered output when there is enough of it, or all of
// it with force.
func (c *excC14N) flush(force bool) {
	if len(c.out) >= c14nFlush || (force && len(c.out) > 0) {
		c.h.Write(c.out)
		c.out = c.out[:0]
	}
}

func appendQName(out []byte, n xml.Name) []byte {
	if n.Space != "" {
		out = append(out, n.Space...)
		out = append(out, ':')
	}
	return append(out, n.Local...)
}

// appendC14NAttr escapes an attribute value as canonical XML does.
func appendC14NAttr(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '&':
			out = append(out, "&amp;"...)
		case '<':
			out = append(out, "&lt;"...)
		case '"':
			out = append(out, "&quot;"...)
		case '\t':
			out = append(out, "&#x9;"...)
		case '\n':
			out = append(out, "&#xA;"...)
		case '\r':
			out = append(out, "&#xD;"...)
		default:
			out = append(out, ch)
		}
	}
	return out
}
