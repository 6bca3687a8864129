package samlidp

import (
	"github.com/beevik/etree"
	"github.com/crewjam/saml"
)

// nameIDAttrs are the attributes of a saml:NameID (SAML Core 2.2.2, 2.2.3).
var nameIDAttrs = [...]string{"NameQualifier", "SPNameQualifier", "Format", "SPProvidedID"}

// nameID is a NameID as it stood in a message: its value and each of its
// attributes, with whether it was there at all.
type nameID struct {
	value string
	attrs [len(nameIDAttrs)]*string
}

// readNameID reads el, a saml:NameID, exactly.
func readNameID(el *etree.Element) nameID {
	n := nameID{value: el.Text()}
	for i, name := range nameIDAttrs {
		for _, a := range el.Attr {
			if a.Space == "" && a.Key == name {
				v := a.Value
				n.attrs[i] = &v
			}
		}
	}
	return n
}

func (n nameID) equal(o nameID) bool {
	if n.value != o.value {
		return false
	}
	for i := range n.attrs {
		a, b := n.attrs[i], o.attrs[i]
		if (a == nil) != (b == nil) || (a != nil && *a != *b) {
			return false
		}
	}
	return true
}

// recordIssued keeps the NameID of a, as it goes on the wire, by the
// SessionIndex of its AuthnStatement, for StrictLogout.
func (p *IdP) recordIssued(a *saml.Assertion) {
	if a.Subject == nil || a.Subject.NameID == nil || len(a.AuthnStatements) == 0 {
		return
	}
	n := readNameID(a.Subject.NameID.Element())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.issued.Put(a.AuthnStatements[0].SessionIndex, n, p.now().Add(sessionLifetime))
}

// endSession ends the session a LogoutRequest names, when its NameID is
// exactly one the IdP issued (for the session its SessionIndex names, when
// it has one), and reports whether it found one.
func (p *IdP) endSession(request []byte) bool {
	root, err := Parse(request)
	if err != nil {
		return false
	}
	var got *nameID
	var index string
	hasIndex := false
	for _, c := range root.ChildElements() {
		switch {
		case c.Tag == "NameID" && c.NamespaceURI() == nsSAML:
			n := readNameID(c)
			got = &n
		case c.Tag == "SessionIndex" && c.NamespaceURI() == "urn:oasis:names:tc:SAML:2.0:protocol":
			index, hasIndex = c.Text(), true
		}
	}
	if got == nil {
		return false
	}
	if hasIndex {
		return p.endIndexed(index, *got)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for idx, n := range p.issued.All() {
		if n.equal(*got) {
			p.issued.Delete(idx)
			return true
		}
	}
	return false
}

// endIndexed ends the session index names when it was issued to n.
func (p *IdP) endIndexed(index string, n nameID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if issued, ok := p.issued.Get(index); ok && issued.equal(n) {
		p.issued.Delete(index)
		return true
	}
	return false
}
