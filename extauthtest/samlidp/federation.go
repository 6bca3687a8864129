package samlidp

import (
	"bytes"
	"crypto/rsa"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
)

// Namespaces of the metadata extensions a federation adds to its entities.
const (
	nsMD     = "urn:oasis:names:tc:SAML:2.0:metadata"
	nsMDUI   = "urn:oasis:names:tc:SAML:metadata:ui"
	nsMDRPI  = "urn:oasis:names:tc:SAML:metadata:rpi"
	nsMDAttr = "urn:oasis:names:tc:SAML:metadata:attribute"
)

// Entity is what a federation's registry adds to an entity's metadata
// before it publishes it: names and logos for discovery pages (mdui), the
// registrar (mdrpi) and entity categories (mdattr).
type Entity struct {
	// DisplayNames maps an xml:lang to the IdP's mdui:DisplayName.
	DisplayNames map[string]string
	// Logos are mdui:Logo URLs (https or data:), with their size.
	Logos []Logo
	// RegistrationAuthority names the federation that registered it.
	RegistrationAuthority string
	// Categories are its entity categories
	// (http://macedir.org/entity-category).
	Categories []string
}

// Logo is an mdui:Logo.
type Logo struct {
	URL           string
	Lang          string
	Width, Height int
}

// Decorate returns an IdP's metadata document (an md:EntityDescriptor,
// such as Metadata returns, or any IdP's) with e's extensions, where the
// metadata profiles put them: mdui:UIInfo in the IDPSSODescriptor's
// Extensions, the registration and the categories in the entity's.
func Decorate(entity []byte, e Entity) ([]byte, error) {
	root, err := Parse(entity)
	if err != nil {
		return nil, err
	}
	if root.Tag != "EntityDescriptor" {
		return nil, errors.New("samlidp: not an EntityDescriptor")
	}
	prefix := root.Space
	q := func(local string) string {
		if prefix == "" {
			return local
		}
		return prefix + ":" + local
	}
	ext := etree.NewElement(q("Extensions"))
	if e.RegistrationAuthority != "" {
		ri := ext.CreateElement("mdrpi:RegistrationInfo")
		ri.CreateAttr("xmlns:mdrpi", nsMDRPI)
		ri.CreateAttr("registrationAuthority", e.RegistrationAuthority)
	}
	if len(e.Categories) > 0 {
		ea := ext.CreateElement("mdattr:EntityAttributes")
		ea.CreateAttr("xmlns:mdattr", nsMDAttr)
		a := ea.CreateElement("saml:Attribute")
		a.CreateAttr("xmlns:saml", nsSAML)
		a.CreateAttr("Name", "http://macedir.org/entity-category")
		a.CreateAttr("NameFormat", "urn:oasis:names:tc:SAML:2.0:attrname-format:uri")
		for _, c := range e.Categories {
			a.CreateElement("saml:AttributeValue").SetText(c)
		}
	}
	if len(ext.ChildElements()) > 0 {
		insertExtensions(root, ext)
	}
	if len(e.DisplayNames) > 0 || len(e.Logos) > 0 {
		var idp *etree.Element
		for _, c := range root.ChildElements() {
			if c.Tag == "IDPSSODescriptor" {
				idp = c
				break
			}
		}
		if idp == nil {
			return nil, errors.New("samlidp: the entity has no IDPSSODescriptor")
		}
		ext := etree.NewElement(q("Extensions"))
		ui := ext.CreateElement("mdui:UIInfo")
		ui.CreateAttr("xmlns:mdui", nsMDUI)
		langs := make([]string, 0, len(e.DisplayNames))
		for l := range e.DisplayNames {
			langs = append(langs, l)
		}
		sort.Strings(langs)
		for _, l := range langs {
			n := ui.CreateElement("mdui:DisplayName")
			n.CreateAttr("xml:lang", l)
			n.SetText(e.DisplayNames[l])
		}
		for _, lg := range e.Logos {
			el := ui.CreateElement("mdui:Logo")
			el.CreateAttr("height", strconv.Itoa(lg.Height))
			el.CreateAttr("width", strconv.Itoa(lg.Width))
			if lg.Lang != "" {
				el.CreateAttr("xml:lang", lg.Lang)
			}
			el.SetText(lg.URL)
		}
		insertExtensions(idp, ext)
	}
	return Serialize(root)
}

// insertExtensions puts ext first among el's children, after a signature.
func insertExtensions(el, ext *etree.Element) {
	at := 0
	for _, c := range el.ChildElements() {
		if c.Tag == "Signature" {
			at = c.Index() + 1
		}
	}
	el.InsertChildAt(at, ext)
}

// AggregateOptions shape a federation's aggregate.
type AggregateOptions struct {
	// Signer signs it (enveloped, exclusive C14N, first child of the
	// EntitiesDescriptor); nil leaves it unsigned.
	Signer *MetadataSigner
	// ValidUntil and CacheDuration go on the EntitiesDescriptor when set.
	ValidUntil    time.Time
	CacheDuration time.Duration
	// Name is its Name attribute.
	Name string
}

// aggregateID is the ID of the EntitiesDescriptor, which its signature
// references.
const aggregateID = "_aggregate-1"

// Aggregate returns a federation's aggregate of entities (metadata
// documents, each an md:EntityDescriptor): an md:EntitiesDescriptor that
// lists them, signed as federations sign theirs, of any size (a
// federation's 8 000 entities take a few seconds).
//
// No library canonicalizes a document of that size (goxmldsig stops at a
// thousand elements), so none is asked to: the aggregate is written in its
// exclusive canonical form, each entity canonicalized on its own, and the
// signature's digest is that of its bytes. An entity canonicalized alone
// is what it is inside the aggregate but for the namespaces that the
// aggregate's element renders and the entity uses: md, which an
// md:EntityDescriptor's canonical form declares first thing and which is
// then left out. (Should an entity use md otherwise, the aggregate's
// element takes the first of md1, md2, ... that no entity declares.)
func Aggregate(entities [][]byte, o AggregateOptions) ([]byte, error) {
	canon := make([][]byte, len(entities))
	declared := map[string]bool{}
	apexMD := make([]bool, len(entities))
	size := 0
	for i, e := range entities {
		root, err := Parse(e)
		if err != nil {
			return nil, err
		}
		if root.Tag != "EntityDescriptor" || root.NamespaceURI() != nsMD {
			return nil, fmt.Errorf("samlidp: entity %d is not an md:EntityDescriptor", i)
		}
		d := map[string]bool{}
		walkDeclarations(root, d)
		// md on the apex, bound to the metadata namespace, is md as the
		// aggregate's element binds it.
		apexMD[i] = root.Space == "md"
		for p := range d {
			declared[p] = declared[p] || p != "md" || !apexMD[i]
		}
		if canon[i], err = dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("").Canonicalize(root); err != nil {
			return nil, fmt.Errorf("samlidp: entity %d: %w", i, err)
		}
		size += len(canon[i]) + 1
	}
	prefix := "md"
	for n := 1; declared[prefix]; n++ {
		prefix = "md" + strconv.Itoa(n)
	}
	if prefix == "md" {
		for i, c := range canon {
			if apexMD[i] {
				canon[i] = bytes.Replace(c, []byte(` xmlns:md="`+nsMD+`"`), nil, 1)
			}
		}
	}

	var b bytes.Buffer
	b.Grow(size + 4096)
	// The canonical start tag: the declaration, then the attributes in
	// the order of their names.
	b.WriteString("<" + prefix + ":EntitiesDescriptor xmlns:" + prefix + `="` + nsMD + `" ID="` + aggregateID + `"`)
	if o.Name != "" {
		b.WriteString(` Name="`)
		b.Write(escapeCanonicalAttr(o.Name))
		b.WriteString(`"`)
	}
	if o.CacheDuration > 0 {
		b.WriteString(` cacheDuration="PT` + strconv.Itoa(int(o.CacheDuration/time.Second)) + `S"`)
	}
	if !o.ValidUntil.IsZero() {
		b.WriteString(` validUntil="` + o.ValidUntil.UTC().Format(time.RFC3339) + `"`)
	}
	b.WriteString(">")
	afterStart := b.Len()
	for _, c := range canon {
		b.WriteByte('\n')
		b.Write(c)
	}
	b.WriteString("\n</" + prefix + ":EntitiesDescriptor>")
	doc := b.Bytes()
	if o.Signer == nil {
		return doc, nil
	}
	sig, err := signCanonical(doc, aggregateID, o.Signer)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(doc)+len(sig))
	out = append(out, doc[:afterStart]...)
	out = append(out, sig...)
	return append(out, doc[afterStart:]...), nil
}

// walkDeclarations records the namespace prefixes declared in el's
// subtree.
func walkDeclarations(el *etree.Element, declared map[string]bool) {
	for _, a := range el.Attr {
		if a.Space == "xmlns" {
			declared[a.Key] = true
		}
	}
	for _, c := range el.ChildElements() {
		walkDeclarations(c, declared)
	}
}

// signCanonical returns the enveloped signature of doc, which is in
// exclusive canonical form already, by its document element of ID id: the
// digest is that of doc's bytes, the signature over SignedInfo written in
// its canonical form too.
func signCanonical(doc []byte, id string, s *MetadataSigner) ([]byte, error) {
	o := s.Sign
	if o.SignatureMethod == "" {
		o.SignatureMethod = RSASHA256
	}
	if o.DigestMethod == "" {
		o.DigestMethod = DigestSHA256
	}
	dh, ok := digestHashes[o.DigestMethod]
	if !ok {
		return nil, fmt.Errorf("samlidp: unknown digest %s", o.DigestMethod)
	}
	ctx := dsig.NewDefaultSigningContext(dsig.TLSCertKeyStore(tls.Certificate{Certificate: [][]byte{s.Cert.Raw}, PrivateKey: s.Key, Leaf: s.Cert}))
	if err := ctx.SetSignatureMethod(o.SignatureMethod); err != nil {
		return nil, err
	}
	p := o.Prefix
	if p == "" && !o.Default {
		p = "ds"
	}
	q := func(local string) string {
		if p == "" {
			return local
		}
		return p + ":" + local
	}
	decl := ` xmlns="` + dsig.Namespace + `"`
	if p != "" {
		decl = ` xmlns:` + p + `="` + dsig.Namespace + `"`
	}
	el := func(b *bytes.Buffer, local, attrs, content string) {
		b.WriteString("<" + q(local) + attrs + ">" + content + "</" + q(local) + ">")
	}
	d := dh.New()
	d.Write(doc)
	var transforms, ref, si bytes.Buffer
	el(&transforms, "Transform", ` Algorithm="`+string(dsig.EnvelopedSignatureAltorithmId)+`"`, "")
	el(&transforms, "Transform", ` Algorithm="`+string(dsig.CanonicalXML10ExclusiveAlgorithmId)+`"`, "")
	el(&ref, "Transforms", "", transforms.String())
	el(&ref, "DigestMethod", ` Algorithm="`+o.DigestMethod+`"`, "")
	el(&ref, "DigestValue", "", base64.StdEncoding.EncodeToString(d.Sum(nil)))
	var inner bytes.Buffer
	el(&inner, "CanonicalizationMethod", ` Algorithm="`+string(dsig.CanonicalXML10ExclusiveAlgorithmId)+`"`, "")
	el(&inner, "SignatureMethod", ` Algorithm="`+o.SignatureMethod+`"`, "")
	el(&inner, "Reference", ` URI="#`+id+`"`, ref.String())
	// SignedInfo canonicalized alone declares its prefix itself.
	el(&si, "SignedInfo", decl, inner.String())
	sh := ctx.Hash.New()
	sh.Write(si.Bytes())
	value, err := rsa.SignPKCS1v15(nil, s.Key, ctx.Hash, sh.Sum(nil))
	if err != nil {
		return nil, err
	}
	var keyInfo, x509Data, sig bytes.Buffer
	el(&x509Data, "X509Certificate", "", base64.StdEncoding.EncodeToString(s.Cert.Raw))
	el(&keyInfo, "X509Data", "", x509Data.String())
	var body bytes.Buffer
	el(&body, "SignedInfo", "", inner.String())
	el(&body, "SignatureValue", "", base64.StdEncoding.EncodeToString(value))
	el(&body, "KeyInfo", "", keyInfo.String())
	el(&sig, "Signature", decl, body.String())
	return sig.Bytes(), nil
}

// escapeCanonicalAttr escapes an attribute value as canonical XML writes
// it.
func escapeCanonicalAttr(s string) []byte {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b = append(b, "&amp;"...)
		case '<':
			b = append(b, "&lt;"...)
		case '"':
			b = append(b, "&quot;"...)
		case '\t':
			b = append(b, "&#x9;"...)
		case '\n':
			b = append(b, "&#xA;"...)
		case '\r':
			b = append(b, "&#xD;"...)
		default:
			b = append(b, c)
		}
	}
	return b
}
