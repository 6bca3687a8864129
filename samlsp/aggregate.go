package samlsp

import (
	"bytes"
	"crypto"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	dsig "github.com/russellhaering/goxmldsig"
)

// A federation's aggregate is read in one pass over the document as
// fetched: encoding/xml's tokenizer feeds the streaming canonicalizer
// (c14n.go), whose output is hashed for the signature's digest, and an
// index of the IdPs, each a byte range of the one retained buffer with what
// the discovery page shows of it. The signature over SignedInfo is checked
// first, on that small element alone; the index is used only once the
// digest of the whole document matches it. No tree of the document is ever
// built: an IdP's entry is parsed when a sign-in needs it.

// Namespaces of the metadata extensions the index reads.
const (
	nsMDUI   = "urn:oasis:names:tc:SAML:metadata:ui"
	nsMDRPI  = "urn:oasis:names:tc:SAML:metadata:rpi"
	nsMDAttr = "urn:oasis:names:tc:SAML:metadata:attribute"
	// entityCategory is the attribute of the entity categories an entity
	// belongs to, entityCategorySupport of those an IdP says it supports
	// (https://macedir.org/entity-category): an IdP declares Research and
	// Scholarship, CoCo and the like with the latter.
	entityCategory        = "http://macedir.org/entity-category"
	entityCategorySupport = "http://macedir.org/entity-category-support"
	// CategoryHideFromDiscovery marks an IdP that asks to be left out of
	// discovery pages (REFEDS).
	CategoryHideFromDiscovery = "http://refeds.org/category/hide-from-discovery"
	// nsIdPDisc is the namespace of the SAML IdP Discovery Protocol.
	nsIdPDisc = "urn:oasis:names:tc:SAML:profiles:SSO:idp-discovery-protocol"
)

// Bounds of what the index keeps of one IdP: the names and logos a
// discovery page can show, and no more.
const (
	maxIdPNames    = 16
	maxIdPLogos    = 4
	maxNameRunes   = 200
	maxLogoBytes   = 256 << 10
	maxCategories  = 32
	maxEntityIDLen = 1024
)

// aggregate is a verified federation aggregate and its index.
type aggregate struct {
	buf []byte
	// validUntil and cacheDuration are the document's own.
	validUntil    time.Time
	cacheDuration time.Duration
	// entities counts every EntityDescriptor; idps lists the IdPs (those
	// with a SAML 2.0 IDPSSODescriptor, not expired) in document order.
	entities int
	idps     []*fedIdP
	byID     map[string]*fedIdP
	// expired counts the IdPs left out for their own validUntil.
	expired int
	// sigMethod and digestMethod are the algorithms of its signature.
	sigMethod, digestMethod string
	// sources indexes idps by artifact source ID, made on first use
	// (bySource).
	sourceOnce sync.Once
	sources    map[[20]byte]*fedIdP
}

// fedIdP is one IdP of an aggregate, as the index knows it.
type fedIdP struct {
	entityID string
	// start and end delimit its EntityDescriptor in the buffer; qname is
	// its tag as written, ns the declarations it inherits.
	start, end int
	qname      string
	ns         []nsBind
	// validUntil is the earliest of its own, its IDPSSODescriptor's and
	// its ancestors'.
	validUntil            time.Time
	registrationAuthority string
	// categories are the entity categories it belongs to, supports those
	// it supports.
	categories, supports []string
	names                []langText
	logos                []logoRef
	// sso are the SAML 2.0 single sign-on bindings it offers that we can
	// use (ssoRedirect, ssoPOST); signingKey is set when it publishes a
	// key for signing (use="signing", or no use).
	sso        uint8
	signingKey bool
}

// The SSO bindings of fedIdP.sso.
const (
	ssoRedirect uint8 = 1 << iota
	ssoPOST
)

// unusable says why no sign-in can start at e, "" when one can: an IdP
// whose only single sign-on endpoints are SAML 1 or HTTP-Artifact ones, or
// which publishes no signing key, is listed by federations all the same.
func (e *fedIdP) unusable() string {
	switch {
	case e.sso == 0:
		return "it has no SAML 2.0 single sign-on endpoint with the HTTP-Redirect or HTTP-POST binding"
	case !e.signingKey:
		return "its metadata has no signing key"
	}
	return ""
}

// langText is a name and its xml:lang; org marks an
// OrganizationDisplayName, which stands in for a missing mdui:DisplayName.
type langText struct {
	lang, text string
	org        bool
}

// logoRef is an mdui:Logo: its language and size, and where its URL lies in
// the buffer (decoded when a page shows it).
type logoRef struct {
	lang          string
	width, height int
	start, end    int
}

// aggregateRules are what scanAggregate checks a document against.
type aggregateRules struct {
	cert        *x509.Certificate
	now         time.Time
	policy      algPolicy
	maxValidity time.Duration
}

// scanAggregate verifies a signed aggregate (an md:EntitiesDescriptor, or
// one md:EntityDescriptor) and indexes its IdPs. The rules against
// signature wrapping: exactly one ds:Signature in the whole document, the
// first child of the document element, referencing that element (by its ID,
// or the whole document with URI=""), with the enveloped-signature and
// exclusive canonicalization transforms only; so everything the index holds
// lies inside what the signature covers. The document must carry a
// validUntil in the future and within maxValidity. What parseXML refuses
// (DOCTYPEs, processing instructions, other encodings, names that are not
// namespace-well-formed, repeated attributes) is refused here too.
func scanAggregate(buf []byte, r aggregateRules) (*aggregate, error) {
	if looksLikeHTML(buf) {
		return nil, ErrHTMLMetadata
	}
	sig, err := readAggregateSignature(buf)
	if err != nil {
		return nil, err
	}
	ref, err := verifySignedInfo(sig, r)
	if err != nil {
		return nil, err
	}
	h := ref.hash.New()
	s := &scanner{buf: buf, c: newExcC14N(h, ref.prefixList), sigStart: sig.start, rules: r,
		agg: &aggregate{buf: buf, byID: map[string]*fedIdP{}, sigMethod: sig.method, digestMethod: ref.digest}}
	if err := s.run(); err != nil {
		return nil, err
	}
	if ref.uri != "" && ref.uri != "#"+s.rootID {
		return nil, errors.New("the signature does not reference the document element")
	}
	s.c.flush(true)
	if subtle.ConstantTimeCompare(h.Sum(nil), ref.digestValue) != 1 {
		return nil, errors.New("the signature's digest does not match the document: it was altered after signing")
	}
	a := s.agg
	switch {
	case a.validUntil.IsZero():
		return nil, errors.New("the aggregate has no validUntil: a signed aggregate must say until when it may be used")
	case !a.validUntil.After(r.now):
		return nil, fmt.Errorf("the aggregate expired on %s (validUntil)", a.validUntil.UTC().Format(time.RFC3339))
	case r.maxValidity > 0 && a.validUntil.Sub(r.now) > r.maxValidity:
		return nil, fmt.Errorf("the aggregate is valid until %s, further ahead than the %s max_validity allows",
			a.validUntil.UTC().Format(time.RFC3339), r.maxValidity)
	}
	return a, nil
}

// aggSignature is the signature of an aggregate as found before the pass.
type aggSignature struct {
	el *etree.Element
	// start is its offset in the document; method its SignatureMethod.
	start  int
	method string
	rootID string
}

// readAggregateSignature reads the document up to the end of its document
// element's first child, which must be its ds:Signature, and returns that
// element parsed alone, with the namespace declarations it inherits.
func readAggregateSignature(buf []byte) (*aggSignature, error) {
	d := newDecoder(buf)
	c := newExcC14N(nil, nil)
	var sigStart int
	var rootID string
	for {
		off := int(d.InputOffset())
		tok, err := d.RawToken()
		if err == io.EOF {
			return nil, errors.New("malformed XML: no document element")
		}
		if err != nil {
			return nil, fmt.Errorf("malformed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if err := openRaw(c, t, true); err != nil {
				return nil, err
			}
			if c.depth() == 1 {
				rootID = rawAttr(t.Attr, "ID")
				continue
			}
			if !(t.Name.Local == "Signature" && c.lookup(t.Name.Space) == nsDSig) {
				return nil, errors.New("the aggregate is not signed: the document element's first child must be its ds:Signature")
			}
			sigStart = off
			// Read to its end.
			for c.depth() > 1 {
				tok, err := d.RawToken()
				if err != nil {
					return nil, fmt.Errorf("malformed XML: %w", err)
				}
				switch t := tok.(type) {
				case xml.StartElement:
					if err := openRaw(c, t, true); err != nil {
						return nil, err
					}
				case xml.EndElement:
					c.end()
				case xml.ProcInst, xml.Directive:
					return nil, errors.New("XML processing instructions and directives are not allowed")
				}
			}
			sigEnd := int(d.InputOffset())
			doc := standalone(buf[sigStart:sigEnd], string(appendQName(nil, t.Name)), c.frames[0].decls)
			el, err := parseXML(doc)
			if err != nil {
				return nil, fmt.Errorf("the aggregate's signature: %w", err)
			}
			sm, _ := signatureMethods(el)
			return &aggSignature{el: el, start: sigStart, method: sm, rootID: rootID}, nil
		case xml.EndElement:
			return nil, errors.New("the aggregate is not signed: the document element's first child must be its ds:Signature")
		case xml.CharData:
			if c.depth() == 0 && len(bytes.TrimSpace(t)) > 0 {
				return nil, errors.New("malformed XML: text outside the document element")
			}
		case xml.Directive:
			return nil, errors.New("XML directives (DOCTYPE, ENTITY) are not allowed")
		case xml.ProcInst:
			if t.Target != "xml" || off != 0 {
				return nil, errors.New("XML processing instructions are not allowed")
			}
		}
	}
}

// standalone makes the element raw (its bytes, whose tag is name) a
// document of its own: the declarations it inherits from ns are added to
// its start tag, except those it makes itself.
func standalone(raw []byte, qname string, inherited []nsBind) []byte {
	tag := len(qname) + 1
	own := raw[:bytes.IndexByte(raw, '>')]
	var b bytes.Buffer
	b.Grow(len(raw) + 64*len(inherited))
	b.Write(raw[:tag])
	for _, n := range inherited {
		decl := "xmlns"
		if n.prefix != "" {
			decl += ":" + n.prefix
		}
		if declares(own, decl) || n.uri == "" {
			continue
		}
		b.WriteString(" " + decl + `="`)
		b.Write(appendC14NAttr(nil, n.uri))
		b.WriteByte('"')
	}
	b.Write(raw[tag:])
	return b.Bytes()
}

// declares reports whether the start tag raw declares decl (xmlns or
// xmlns:p).
func declares(tag []byte, decl string) bool {
	for i := 0; ; {
		j := bytes.Index(tag[i:], []byte(decl))
		if j < 0 {
			return false
		}
		i += j
		end := i + len(decl)
		if i > 0 && isXMLSpace(tag[i-1]) && end < len(tag) && (tag[end] == '=' || isXMLSpace(tag[end])) {
			return true
		}
		i = end
	}
}

func isXMLSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// aggRef is what a verified SignedInfo says of its one Reference.
type aggRef struct {
	uri         string
	digest      string
	hash        crypto.Hash
	digestValue []byte
	prefixList  []string
}

// verifySignedInfo checks the signature's shape and algorithms and its
// SignatureValue over SignedInfo with the pinned certificate, and returns
// its Reference as read from the canonical SignedInfo that was verified.
func verifySignedInfo(sig *aggSignature, r aggregateRules) (*aggRef, error) {
	el := sig.el
	var si, sv *etree.Element
	keyInfo := 0
	for _, c := range el.ChildElements() {
		switch {
		case is(c, nsDSig, "SignedInfo") && si == nil:
			si = c
		case is(c, nsDSig, "SignatureValue") && sv == nil:
			sv = c
		case is(c, nsDSig, "KeyInfo") && keyInfo == 0:
			keyInfo++
		default:
			return nil, fmt.Errorf("the aggregate's signature has an unexpected %s", c.Tag)
		}
	}
	if si == nil || sv == nil {
		return nil, errors.New("the aggregate's signature lacks SignedInfo or SignatureValue")
	}
	cm, err := oneChild(si, nsDSig, "CanonicalizationMethod")
	if err != nil {
		return nil, err
	}
	if attr(cm, "Algorithm") != string(dsig.CanonicalXML10ExclusiveAlgorithmId) {
		return nil, fmt.Errorf("the aggregate's SignedInfo canonicalization %.100q is not exclusive C14N", attr(cm, "Algorithm"))
	}
	sm, err := oneChild(si, nsDSig, "SignatureMethod")
	if err != nil {
		return nil, err
	}
	alg, err := r.policy.signatureMethod(attr(sm, "Algorithm"))
	if err != nil {
		return nil, fmt.Errorf("the aggregate's signature: %w", err)
	}
	value, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text(sv)), ""))
	if err != nil {
		return nil, errors.New("the aggregate's SignatureValue is not base64")
	}
	declareInScope(si)
	canonical, err := dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList(inclusivePrefixes(cm)).Canonicalize(si)
	if err != nil {
		return nil, fmt.Errorf("the aggregate's SignedInfo: %w", err)
	}
	if r.cert == nil {
		return nil, errors.New("no federation signing certificate")
	}
	if r.now.Before(r.cert.NotBefore) || r.now.After(r.cert.NotAfter) {
		return nil, fmt.Errorf("the federation signing certificate is not valid now (valid %s to %s)",
			r.cert.NotBefore.UTC().Format(time.DateOnly), r.cert.NotAfter.UTC().Format(time.DateOnly))
	}
	if err := r.cert.CheckSignature(alg, canonical, value); err != nil {
		return nil, fmt.Errorf("the aggregate's signature does not verify with the federation signing certificate: %w", err)
	}

	// From here on, only what was verified.
	vsi, err := parseXML(canonical)
	if err != nil {
		return nil, err
	}
	refs := children(vsi, nsDSig, "Reference")
	if len(refs) != 1 || len(vsi.ChildElements()) != 3 {
		return nil, errors.New("the aggregate's signature must have exactly one Reference")
	}
	ref := &aggRef{uri: attr(refs[0], "URI")}
	if ref.uri != "" && ref.uri != "#"+sig.rootID || ref.uri == "#" {
		return nil, errors.New("the aggregate's signature does not reference the document element")
	}
	ts, err := oneChild(refs[0], nsDSig, "Transforms")
	if err != nil {
		return nil, fmt.Errorf("the aggregate's signature: %w", err)
	}
	tl := ts.ChildElements()
	if len(tl) != 2 || !is(tl[0], nsDSig, "Transform") || attr(tl[0], "Algorithm") != string(dsig.EnvelopedSignatureAltorithmId) ||
		!is(tl[1], nsDSig, "Transform") || attr(tl[1], "Algorithm") != string(dsig.CanonicalXML10ExclusiveAlgorithmId) {
		return nil, errors.New("the aggregate's signature must have the transforms enveloped-signature and exclusive C14N, and no others")
	}
	ref.prefixList = strings.Fields(inclusivePrefixes(tl[1]))
	dm, err := oneChild(refs[0], nsDSig, "DigestMethod")
	if err != nil {
		return nil, err
	}
	ref.digest = attr(dm, "Algorithm")
	if ref.hash, err = r.policy.digestMethod(ref.digest); err != nil {
		return nil, fmt.Errorf("the aggregate's signature: %w", err)
	}
	dv, err := oneChild(refs[0], nsDSig, "DigestValue")
	if err != nil {
		return nil, err
	}
	if ref.digestValue, err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text(dv)), "")); err != nil {
		return nil, errors.New("the aggregate's DigestValue is not base64")
	}
	return ref, nil
}

// inclusivePrefixes returns the PrefixList of a canonicalization method's
// ec:InclusiveNamespaces, "" when it has none.
func inclusivePrefixes(m *etree.Element) string {
	for _, c := range m.ChildElements() {
		if c.Tag == "InclusiveNamespaces" && c.NamespaceURI() == string(dsig.CanonicalXML10ExclusiveAlgorithmId) {
			return attr(c, "PrefixList")
		}
	}
	return ""
}

// newDecoder reads buf with encoding/xml under our rules: strict, UTF-8
// only, no entities beyond XML's own.
func newDecoder(buf []byte) *xml.Decoder {
	d := xml.NewDecoder(bytes.NewReader(buf))
	d.Strict = true
	d.CharsetReader = func(label string, _ io.Reader) (io.Reader, error) {
		return nil, fmt.Errorf("unsupported XML encoding %q", label)
	}
	return d
}

// rawAttr returns the value of the unqualified attribute key.
func rawAttr(attrs []xml.Attr, key string) string {
	for _, a := range attrs {
		if a.Name.Space == "" && a.Name.Local == key {
			return a.Value
		}
	}
	return ""
}

// openRaw opens the raw start tag t in c, once checkRawStart passes it.
func openRaw(c *excC14N, t xml.StartElement, omit bool) error {
	if err := checkRawStart(c, t); err != nil {
		return err
	}
	return c.start(t.Name, t.Attr, omit)
}

// checkRawStart applies parseXML's namespace rules (checkElement) to a raw
// start tag, in the scope c keeps, before c opens it.
func checkRawStart(c *excC14N, t xml.StartElement) error {
	if c.depth() >= maxXMLDepth {
		return errors.New("XML nested too deeply")
	}
	if !ncName(t.Name.Local) || (t.Name.Space != "" && !ncName(t.Name.Space)) {
		return fmt.Errorf("XML name %q is not namespace-well-formed", qname(t.Name.Space, t.Name.Local))
	}
	bound := func(prefix string) string {
		for _, a := range t.Attr {
			if a.Name.Space == "xmlns" && a.Name.Local == prefix {
				return a.Value
			}
		}
		return c.lookup(prefix)
	}
	if t.Name.Space == "xmlns" || (t.Name.Space != "" && t.Name.Space != "xml" && bound(t.Name.Space) == "") {
		return fmt.Errorf("XML element %q uses an undeclared prefix", qname(t.Name.Space, t.Name.Local))
	}
	for i, a := range t.Attr {
		if !ncName(a.Name.Local) || (a.Name.Space != "" && !ncName(a.Name.Space)) {
			return fmt.Errorf("XML attribute name %q is not namespace-well-formed", qname(a.Name.Space, a.Name.Local))
		}
		switch {
		case a.Name.Space == "xmlns":
			if a.Value == "" || a.Name.Local == "xmlns" || (a.Name.Local == "xml") != (a.Value == nsXML) || a.Value == nsXMLNS {
				return fmt.Errorf("XML namespace declaration xmlns:%s=%q is not allowed", a.Name.Local, a.Value)
			}
		case a.Name.Space == "" && a.Name.Local == "xmlns":
			if a.Value == nsXML || a.Value == nsXMLNS {
				return fmt.Errorf("XML default namespace %q is not allowed", a.Value)
			}
		case a.Name.Space != "" && a.Name.Space != "xml" && bound(a.Name.Space) == "":
			return fmt.Errorf("XML attribute %q uses an undeclared prefix", qname(a.Name.Space, a.Name.Local))
		}
		for _, b := range t.Attr[:i] {
			if b.Name.Local == a.Name.Local && (b.Name.Space == a.Name.Space || (a.Name.Space != "" && b.Name.Space != "" &&
				a.Name.Space != "xmlns" && b.Name.Space != "xmlns" && bound(a.Name.Space) == bound(b.Name.Space))) {
				return fmt.Errorf("XML attribute %q given twice", qname(a.Name.Space, a.Name.Local))
			}
		}
	}
	return nil
}

// normalizeRawAttrs gives the attributes of the start tag raw the values a
// conforming parser gives them (XML 1.0, 3.3.3): encoding/xml keeps a
// literal tab, newline or carriage return in an attribute value, where the
// value a signer canonicalized holds a space. Character references to them
// (&#10;) stay what they are.
func normalizeRawAttrs(raw []byte, attrs []xml.Attr) error {
	if !bytes.ContainsAny(raw, "\t\n\r") {
		return nil
	}
	k := 0
	for i := 0; i < len(raw); {
		q := raw[i]
		if q != '"' && q != '\'' {
			i++
			continue
		}
		j := bytes.IndexByte(raw[i+1:], q)
		if j < 0 || k >= len(attrs) {
			return errors.New("malformed XML: an attribute value")
		}
		v := raw[i+1 : i+1+j]
		if bytes.ContainsAny(v, "\t\n\r") {
			n := bytes.ReplaceAll(v, []byte("\r\n"), []byte(" "))
			n = bytes.Map(func(r rune) rune {
				if r == '\t' || r == '\n' || r == '\r' {
					return ' '
				}
				return r
			}, n)
			doc := append(append(append([]byte("<x a="), q), n...), q, '/', '>')
			tok, err := newDecoder(doc).RawToken()
			if err != nil {
				return fmt.Errorf("malformed XML: %w", err)
			}
			attrs[k].Value = tok.(xml.StartElement).Attr[0].Value
		}
		k++
		i += j + 2
	}
	if k != len(attrs) {
		return errors.New("malformed XML: attribute values")
	}
	return nil
}

// scanner is the one pass over an aggregate.
type scanner struct {
	buf      []byte
	c        *excC14N
	rules    aggregateRules
	agg      *aggregate
	sigStart int
	rootID   string

	// validity is the stack of validUntils of the open
	// EntitiesDescriptors (zero for none).
	validity []time.Time
	// entity is the IdP being read, nil outside an EntityDescriptor; path
	// is the element path inside it, entityDepth its depth; isIdP is set
	// once it has a SAML 2.0 IDPSSODescriptor, inRole while that role is
	// open.
	entity      *fedIdP
	entityDepth int
	isIdP       bool
	inRole      bool
	path        []xml.Name
	// text gathers the text of the element being read, when it matters.
	text      []byte
	gathering bool
	// logoStart and logoEnd delimit the content of the mdui:Logo being
	// read (-1 before its first text).
	logoStart, logoEnd int
	logoW, logoH       int
	lang               string
	attrName           string
	// scope is the last inherited-declarations snapshot, and the frame it
	// was taken under.
	scope      []nsBind
	scopeOwner int
}

func (s *scanner) run() error {
	d := newDecoder(s.buf)
	c := s.c
	rootDone := false
	for {
		off := int(d.InputOffset())
		tok, err := d.RawToken()
		if err == io.EOF {
			if !rootDone {
				return errors.New("malformed XML: the document ends inside its element")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("malformed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if rootDone {
				return errors.New("malformed XML: more than one document element")
			}
			if err := checkRawStart(c, t); err != nil {
				return err
			}
			if err := normalizeRawAttrs(s.buf[off:d.InputOffset()], t.Attr); err != nil {
				return err
			}
			depth := c.depth()
			omit := depth == 1 && off == s.sigStart
			if err := c.start(t.Name, t.Attr, omit); err != nil {
				return err
			}
			if err := s.startElement(t, off, depth, omit); err != nil {
				return err
			}
		case xml.EndElement:
			f := c.frames
			if len(f) == 0 || f[len(f)-1].name != t.Name {
				return errors.New("malformed XML: an end tag does not match its start tag")
			}
			if err := s.endElement(int(d.InputOffset())); err != nil {
				return err
			}
			if err := c.end(); err != nil {
				return err
			}
			if c.depth() == 0 {
				rootDone = true
			}
		case xml.CharData:
			if c.depth() == 0 {
				if len(bytes.TrimSpace(t)) > 0 {
					return errors.New("malformed XML: text outside the document element")
				}
				continue
			}
			c.text(t)
			switch {
			case s.gathering && s.logoStart != -2:
				if s.logoStart == -1 {
					s.logoStart = off
				}
				s.logoEnd = int(d.InputOffset())
			case s.gathering && len(s.text) <= maxNameRunes*4:
				s.text = append(s.text, t...)
			}
		case xml.Comment:
		case xml.ProcInst:
			if t.Target != "xml" || off != 0 {
				return errors.New("XML processing instructions are not allowed")
			}
		case xml.Directive:
			return errors.New("XML directives (DOCTYPE, ENTITY) are not allowed")
		}
	}
}

// startElement indexes what the element says, once c has opened it at
// depth (0 for the document element).
func (s *scanner) startElement(t xml.StartElement, off, depth int, omit bool) error {
	c := s.c
	ns := c.lookup(t.Name.Space)
	name := xml.Name{Space: ns, Local: t.Name.Local}
	isSig := name.Local == "Signature" && ns == nsDSig
	if isSig && !omit {
		return errors.New("a signature other than the aggregate's: exactly one is allowed, the first child of the document element")
	}
	if id := rawAttr(t.Attr, "ID"); depth > 0 && id != "" && id == s.rootID {
		return errors.New("two elements with the document element's ID")
	}
	if c.omitDepth > 0 {
		return nil
	}
	if depth == 0 {
		s.rootID = rawAttr(t.Attr, "ID")
		switch {
		case name == xml.Name{Space: nsMetadata, Local: "EntitiesDescriptor"}:
			vu, err := s.validUntil(t)
			if err != nil {
				return err
			}
			s.agg.validUntil = vu
			s.agg.cacheDuration = cacheDurationOf(t)
			s.validity = append(s.validity, vu)
			return nil
		case name == xml.Name{Space: nsMetadata, Local: "EntityDescriptor"}:
			vu, err := s.validUntil(t)
			if err != nil {
				return err
			}
			s.agg.validUntil = vu
			s.agg.cacheDuration = cacheDurationOf(t)
		default:
			return errors.New("the document element is neither md:EntitiesDescriptor nor md:EntityDescriptor")
		}
	}
	if s.entity == nil {
		switch name {
		case xml.Name{Space: nsMetadata, Local: "EntitiesDescriptor"}:
			vu, err := s.validUntil(t)
			if err != nil {
				return err
			}
			s.validity = append(s.validity, vu)
		case xml.Name{Space: nsMetadata, Local: "EntityDescriptor"}:
			s.agg.entities++
			vu, err := s.validUntil(t)
			if err != nil {
				return err
			}
			for _, v := range s.validity {
				if !v.IsZero() && (vu.IsZero() || v.Before(vu)) {
					vu = v
				}
			}
			s.entity = &fedIdP{entityID: rawAttr(t.Attr, "entityID"), start: off, qname: string(appendQName(nil, t.Name)),
				validUntil: vu, ns: s.inherited()}
			s.entityDepth = depth
			s.isIdP, s.inRole = false, false
			s.path = s.path[:0]
		}
		return nil
	}

	// Inside an entity: what a discovery page shows and the allow-lists
	// read, at the paths the metadata profiles put it.
	s.path = append(s.path, name)
	e := s.entity
	p := s.path
	at := func(names ...string) bool {
		if len(p) != len(names) {
			return false
		}
		for i, n := range names {
			if p[i].Local != n {
				return false
			}
		}
		return true
	}
	switch {
	case at("IDPSSODescriptor") && ns == nsMetadata:
		s.inRole = slices.Contains(strings.Fields(rawAttr(t.Attr, "protocolSupportEnumeration")), nsProtocol)
		if !s.inRole {
			return nil
		}
		s.isIdP = true
		// A role's validUntil bounds the IdP as its entity's does.
		vu, err := s.validUntil(t)
		if err != nil {
			return err
		}
		if !vu.IsZero() && (e.validUntil.IsZero() || vu.Before(e.validUntil)) {
			e.validUntil = vu
		}
	case at("IDPSSODescriptor", "SingleSignOnService") && ns == nsMetadata && s.inRole:
		switch rawAttr(t.Attr, "Binding") {
		case BindingRedirect:
			e.sso |= ssoRedirect
		case BindingPOST:
			e.sso |= ssoPOST
		}
	case at("IDPSSODescriptor", "KeyDescriptor") && ns == nsMetadata && s.inRole:
		if u := rawAttr(t.Attr, "use"); u == "" || u == "signing" {
			e.signingKey = true
		}
	case at("Extensions", "RegistrationInfo") && ns == nsMDRPI:
		e.registrationAuthority = rawAttr(t.Attr, "registrationAuthority")
	case at("Extensions", "EntityAttributes", "Attribute") && ns == nsAssertion && p[1].Space == nsMDAttr:
		s.attrName = rawAttr(t.Attr, "Name")
	case at("Extensions", "EntityAttributes", "Attribute", "AttributeValue") && ns == nsAssertion &&
		(s.attrName == entityCategory || s.attrName == entityCategorySupport):
		s.gather(t)
	case at("IDPSSODescriptor", "Extensions", "UIInfo", "DisplayName") && ns == nsMDUI && p[0].Space == nsMetadata && s.inRole:
		s.gather(t)
	case at("IDPSSODescriptor", "Extensions", "UIInfo", "Logo") && ns == nsMDUI && p[0].Space == nsMetadata && s.inRole:
		s.gather(t)
		s.logoStart, s.logoEnd = -1, -1
	case at("Organization", "OrganizationDisplayName") && ns == nsMetadata:
		s.gather(t)
	}
	return nil
}

func (s *scanner) gather(t xml.StartElement) {
	s.gathering = true
	s.text = s.text[:0]
	s.lang = ""
	s.logoStart = -2
	for _, a := range t.Attr {
		if a.Name.Space == "xml" && a.Name.Local == "lang" {
			s.lang = strings.ToLower(a.Value)
		}
	}
	s.logoW, s.logoH = atoiSmall(rawAttr(t.Attr, "width")), atoiSmall(rawAttr(t.Attr, "height"))
}

// endElement is called before c closes the element; end is the offset
// after its end tag.
func (s *scanner) endElement(end int) error {
	c := s.c
	depth := c.depth() - 1
	if c.omitDepth > 0 {
		return nil
	}
	if s.entity == nil {
		f := c.frames[depth]
		if n := len(s.validity); n > 0 && f.name.Local == "EntitiesDescriptor" && c.lookup(f.name.Space) == nsMetadata {
			s.validity = s.validity[:n-1]
		}
		return nil
	}
	if depth == s.entityDepth {
		e := s.entity
		e.end = end
		s.entity = nil
		if !s.isIdP {
			return nil
		}
		switch {
		case e.entityID == "" || len(e.entityID) > maxEntityIDLen:
			return nil
		case !e.validUntil.IsZero() && !e.validUntil.After(s.rules.now):
			s.agg.expired++
			return nil
		}
		if _, dup := s.agg.byID[e.entityID]; dup {
			return fmt.Errorf("the aggregate lists the IdP %.200q twice", e.entityID)
		}
		s.agg.byID[e.entityID] = e
		s.agg.idps = append(s.agg.idps, e)
		return nil
	}
	p := s.path
	s.path = p[:len(p)-1]
	if len(p) == 1 && p[0].Local == "IDPSSODescriptor" {
		s.inRole = false
	}
	if !s.gathering || len(p) == 0 {
		return nil
	}
	s.gathering = false
	e := s.entity
	last := p[len(p)-1].Local
	switch last {
	case "AttributeValue":
		v := strings.TrimSpace(string(s.text))
		switch {
		case s.attrName == entityCategory && len(e.categories) < maxCategories:
			e.categories = append(e.categories, v)
		case s.attrName == entityCategorySupport && len(e.supports) < maxCategories:
			e.supports = append(e.supports, v)
		}
	case "DisplayName", "OrganizationDisplayName":
		if len(e.names) >= maxIdPNames {
			return nil
		}
		t := strings.Join(strings.Fields(string(s.text)), " ")
		if r := []rune(t); len(r) > maxNameRunes {
			t = string(r[:maxNameRunes])
		}
		if t == "" {
			return nil
		}
		e.names = append(e.names, langText{lang: s.lang, text: t, org: last == "OrganizationDisplayName"})
	case "Logo":
		if len(e.logos) < maxIdPLogos && s.logoStart >= 0 && s.logoEnd-s.logoStart <= maxLogoBytes {
			e.logos = append(e.logos, logoRef{lang: s.lang, width: s.logoW, height: s.logoH, start: s.logoStart, end: s.logoEnd})
		}
	}
	return nil
}

// inherited returns the declarations in scope at the element just opened
// from its ancestors, innermost first, one per prefix; consecutive entities
// under one parent share one slice.
func (s *scanner) inherited() []nsBind {
	c := s.c
	if len(c.frames) < 2 {
		return nil
	}
	parent := c.frames[len(c.frames)-2].serial
	if s.scopeOwner == parent {
		return s.scope
	}
	var out []nsBind
	for i := len(c.frames) - 2; i >= 0; i-- {
	next:
		for _, b := range c.frames[i].decls {
			for _, o := range out {
				if o.prefix == b.prefix {
					continue next
				}
			}
			out = append(out, b)
		}
	}
	s.scope, s.scopeOwner = out, parent
	return out
}

// validUntil reads an element's validUntil.
func (s *scanner) validUntil(t xml.StartElement) (time.Time, error) {
	v := rawAttr(t.Attr, "validUntil")
	if v == "" {
		return time.Time{}, nil
	}
	vu, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s validUntil %.50q is not a valid time", t.Name.Local, v)
	}
	return vu, nil
}

// cacheDurationOf reads an element's cacheDuration, zero when it has none
// or one out of range.
func cacheDurationOf(t xml.StartElement) time.Duration {
	v := rawAttr(t.Attr, "cacheDuration")
	if v == "" || len(v) > 32 {
		return 0
	}
	var d saml.Duration
	if err := d.UnmarshalText([]byte(v)); err != nil || d <= 0 || time.Duration(d) > MaxMetadataValidFor {
		return 0
	}
	return time.Duration(d)
}

func atoiSmall(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' || n > 10000 {
			return 0
		}
		n = n*10 + int(r-'0')
	}
	return n
}
