package samlsp

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/beevik/etree"
)

// SPInfo is what the SP metadata says of the application beyond its
// endpoints and keys, as federations ask for it
// (saml_additional_settings.sp_metadata): names and logo for the IdPs'
// consent and discovery pages (mdui:UIInfo), the organisation and
// contacts, entity categories and assurance certifications, and the
// attributes the application asks for.
type SPInfo struct {
	// DisplayNames and Descriptions map an xml:lang to the text.
	DisplayNames, Descriptions map[string]string
	// Logo is an https URL, LogoWidth and LogoHeight its size in pixels.
	Logo                  string
	LogoWidth, LogoHeight int
	// InformationURL and PrivacyStatementURL are pages about the service
	// and its handling of personal data.
	InformationURL, PrivacyStatementURL string
	// OrganizationName, OrganizationDisplayName and OrganizationURL are
	// md:Organization's (English).
	OrganizationName, OrganizationDisplayName, OrganizationURL string
	// Contacts are md:ContactPersons.
	Contacts []Contact
	// EntityCategories (http://macedir.org/entity-category) and
	// AssuranceCertifications (Sirtfi: https://refeds.org/sirtfi) go into
	// the entity's mdattr:EntityAttributes.
	EntityCategories, AssuranceCertifications []string
	// RequestedAttributes go into an md:AttributeConsumingService.
	RequestedAttributes []RequestedAttribute
}

// Contact is an md:ContactPerson. Type is technical, support,
// administrative, billing, other, or security: the REFEDS security
// contact that Sirtfi requires (contactType="other" with
// remd:contactType="http://refeds.org/metadata/contactType/security").
type Contact struct {
	Type, Name, Email string
}

// ContactTypes are the values of Contact.Type.
var ContactTypes = []string{"technical", "support", "administrative", "billing", "other", "security"}

// RequestedAttribute is an md:RequestedAttribute (URI name format).
type RequestedAttribute struct {
	Name, FriendlyName string
	Required           bool
}

// Namespaces of our metadata's extensions.
const (
	nsREMD         = "http://refeds.org/metadata"
	refedsSecurity = "http://refeds.org/metadata/contactType/security"
	assuranceCert  = "urn:oasis:names:tc:SAML:attribute:assurance-certification"
	attrURIFormat  = "urn:oasis:names:tc:SAML:2.0:attrname-format:uri"
)

// zero reports whether i says nothing.
func (i *SPInfo) zero() bool {
	return len(i.DisplayNames) == 0 && len(i.Descriptions) == 0 && i.Logo == "" && i.InformationURL == "" &&
		i.PrivacyStatementURL == "" && i.OrganizationName == "" && i.OrganizationDisplayName == "" && i.OrganizationURL == "" &&
		len(i.Contacts) == 0 && len(i.EntityCategories) == 0 && len(i.AssuranceCertifications) == 0 && len(i.RequestedAttributes) == 0
}

// addSPInfo writes i into the SP metadata root (an EntityDescriptor in
// the metadata namespace, unprefixed), where the schemas put each part.
func addSPInfo(root *etree.Element, i *SPInfo, discoveryResponse string) {
	var sso *etree.Element
	for _, c := range root.ChildElements() {
		if c.Tag == "SPSSODescriptor" {
			sso = c
		}
	}
	if sso != nil && discoveryResponse != "" {
		// Where an external discovery service may send the browser back
		// (the SAML IdP Discovery Protocol, 2.4.1).
		ext := etree.NewElement("Extensions")
		dr := ext.CreateElement("idpdisc:DiscoveryResponse")
		dr.CreateAttr("xmlns:idpdisc", nsIdPDisc)
		dr.CreateAttr("Binding", nsIdPDisc)
		dr.CreateAttr("Location", discoveryResponse)
		dr.CreateAttr("index", "0")
		sso.InsertChildAt(0, ext)
	}
	if i.zero() {
		return
	}
	if attrs := entityAttributes(i); attrs != nil {
		ext := etree.NewElement("Extensions")
		ext.AddChild(attrs)
		root.InsertChildAt(0, ext)
	}
	if sso != nil {
		if ui := uiInfo(i); ui != nil {
			ext := sso.SelectElement("Extensions")
			if ext == nil {
				ext = etree.NewElement("Extensions")
				sso.InsertChildAt(0, ext)
			}
			ext.InsertChildAt(0, ui)
		}
		if len(i.RequestedAttributes) > 0 {
			acs := sso.CreateElement("AttributeConsumingService")
			acs.CreateAttr("index", "0")
			acs.CreateAttr("isDefault", "true")
			name := i.DisplayNames["en"]
			if name == "" {
				for _, l := range slices.Sorted(maps.Keys(i.DisplayNames)) {
					name = i.DisplayNames[l]
					break
				}
			}
			if name == "" {
				name = root.SelectAttrValue("entityID", "")
			}
			sn := acs.CreateElement("ServiceName")
			sn.CreateAttr("xml:lang", "en")
			sn.SetText(name)
			for _, a := range i.RequestedAttributes {
				ra := acs.CreateElement("RequestedAttribute")
				ra.CreateAttr("Name", a.Name)
				ra.CreateAttr("NameFormat", attrURIFormat)
				if a.FriendlyName != "" {
					ra.CreateAttr("FriendlyName", a.FriendlyName)
				}
				ra.CreateAttr("isRequired", strconv.FormatBool(a.Required))
			}
		}
	}
	if i.OrganizationName != "" || i.OrganizationDisplayName != "" || i.OrganizationURL != "" {
		org := root.CreateElement("Organization")
		for _, f := range [...][2]string{{"OrganizationName", i.OrganizationName}, {"OrganizationDisplayName", i.OrganizationDisplayName},
			{"OrganizationURL", i.OrganizationURL}} {
			if f[1] != "" {
				el := org.CreateElement(f[0])
				el.CreateAttr("xml:lang", "en")
				el.SetText(f[1])
			}
		}
	}
	for _, c := range i.Contacts {
		cp := root.CreateElement("ContactPerson")
		if c.Type == "security" {
			cp.CreateAttr("contactType", "other")
			cp.CreateAttr("xmlns:remd", nsREMD)
			cp.CreateAttr("remd:contactType", refedsSecurity)
		} else {
			cp.CreateAttr("contactType", c.Type)
		}
		if c.Name != "" {
			cp.CreateElement("GivenName").SetText(c.Name)
		}
		email := c.Email
		if !strings.HasPrefix(email, "mailto:") {
			email = "mailto:" + email
		}
		cp.CreateElement("EmailAddress").SetText(email)
	}
}

// entityAttributes is the mdattr:EntityAttributes of the categories and
// certifications, nil without any.
func entityAttributes(i *SPInfo) *etree.Element {
	if len(i.EntityCategories) == 0 && len(i.AssuranceCertifications) == 0 {
		return nil
	}
	ea := etree.NewElement("mdattr:EntityAttributes")
	ea.CreateAttr("xmlns:mdattr", nsMDAttr)
	add := func(name string, values []string) {
		if len(values) == 0 {
			return
		}
		a := ea.CreateElement("saml:Attribute")
		a.CreateAttr("xmlns:saml", nsAssertion)
		a.CreateAttr("Name", name)
		a.CreateAttr("NameFormat", attrURIFormat)
		for _, v := range values {
			a.CreateElement("saml:AttributeValue").SetText(v)
		}
	}
	add(entityCategory, i.EntityCategories)
	add(assuranceCert, i.AssuranceCertifications)
	return ea
}

// uiInfo is the mdui:UIInfo of i, nil when it has nothing for one.
func uiInfo(i *SPInfo) *etree.Element {
	if len(i.DisplayNames) == 0 && len(i.Descriptions) == 0 && i.Logo == "" && i.InformationURL == "" && i.PrivacyStatementURL == "" {
		return nil
	}
	ui := etree.NewElement("mdui:UIInfo")
	ui.CreateAttr("xmlns:mdui", nsMDUI)
	texts := func(tag string, m map[string]string) {
		for _, l := range slices.Sorted(maps.Keys(m)) {
			el := ui.CreateElement("mdui:" + tag)
			el.CreateAttr("xml:lang", l)
			el.SetText(m[l])
		}
	}
	texts("DisplayName", i.DisplayNames)
	texts("Description", i.Descriptions)
	for _, f := range [...][2]string{{"InformationURL", i.InformationURL}, {"PrivacyStatementURL", i.PrivacyStatementURL}} {
		if f[1] != "" {
			el := ui.CreateElement("mdui:" + f[0])
			el.CreateAttr("xml:lang", "en")
			el.SetText(f[1])
		}
	}
	if i.Logo != "" {
		el := ui.CreateElement("mdui:Logo")
		el.CreateAttr("height", strconv.Itoa(i.LogoHeight))
		el.CreateAttr("width", strconv.Itoa(i.LogoWidth))
		el.SetText(i.Logo)
	}
	return ui
}
