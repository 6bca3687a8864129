package samlidp

import (
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/beevik/etree"
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

// Aggregate returns a federation's aggregate of entities (metadata
// documents, each an md:EntityDescriptor): an md:EntitiesDescriptor that
// lists them, signed as federations sign theirs.
func Aggregate(entities [][]byte, o AggregateOptions) ([]byte, error) {
	root := etree.NewElement("md:EntitiesDescriptor")
	root.CreateAttr("xmlns:md", nsMD)
	root.CreateAttr("ID", "_aggregate-1")
	if o.Name != "" {
		root.CreateAttr("Name", o.Name)
	}
	if !o.ValidUntil.IsZero() {
		root.CreateAttr("validUntil", o.ValidUntil.UTC().Format(time.RFC3339))
	}
	if o.CacheDuration > 0 {
		root.CreateAttr("cacheDuration", "PT"+strconv.Itoa(int(o.CacheDuration/time.Second))+"S")
	}
	for _, e := range entities {
		el, err := Parse(e)
		if err != nil {
			return nil, err
		}
		root.AddChild(el)
	}
	if o.Signer == nil {
		return Serialize(root)
	}
	sig, err := signEnveloped(root, o.Signer.Key, o.Signer.Cert, o.Signer.Sign)
	if err != nil {
		return nil, err
	}
	root.InsertChildAt(0, sig)
	return Serialize(root)
}
