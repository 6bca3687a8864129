package samlsp

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/extauth/extauth/providers"
)

// The bindings an AuthnRequest can be sent with (Options.AuthnRequestBinding).
const (
	BindingRedirect = saml.HTTPRedirectBinding
	BindingPOST     = saml.HTTPPostBinding
)

// Begin builds the AuthnRequest, signed when the SP key pair is configured,
// records its ID and a fresh RelayState handle in tx, and returns the
// HTTP-Redirect URL of the IdP's SSO service.
//
// The post-login destination never travels to the IdP: it stays in the
// sealed transaction (tx.ReturnTo), and RelayState carries only a random
// handle that binds the IdP's answer to this browser's transaction.
func (sp *SP) Begin(ctx context.Context, tx *providers.Transaction) (string, error) {
	md, perr := sp.idpFor(ctx, tx.IdP)
	if perr != nil {
		return "", perr
	}
	return sp.beginRedirect(md, tx)
}

func (sp *SP) beginRedirect(md *idpMetadata, tx *providers.Transaction) (string, error) {
	t := md.authn[0]
	if t == nil {
		return "", noSSO(BindingRedirect)
	}
	o, err := sp.authnOptions(tx)
	if err != nil {
		return "", err
	}
	return sp.redirectAuthnRequest(t, tx, sp.env.Now(), o)
}

// StartsWithPost reports whether sign-ins start with an HTTP-POST
// AuthnRequest: when Options.AuthnRequestBinding says so, or, by default,
// when the IdP metadata lists no HTTP-Redirect single sign-on service but an
// HTTP-POST one. (A saml_idp_sso_service_url override is a redirect
// endpoint unless the option says otherwise.) Without metadata yet, it waits
// for a fetch under way as Begin does. In a federation, where the IdP of
// each sign-in decides, it is false: the routes call BeginAt.
func (sp *SP) StartsWithPost() bool {
	if sp.fed != nil {
		return false
	}
	switch sp.opts.AuthnRequestBinding {
	case BindingPOST:
		return true
	case BindingRedirect:
		return false
	}
	// The wait for metadata is bounded where it happens (metadataWait).
	md, err := sp.metadata(context.Background())
	return err == nil && sp.postsTo(md)
}

// postsTo reports whether a sign-in at md's IdP starts with an HTTP-POST
// AuthnRequest.
func (sp *SP) postsTo(md *idpMetadata) bool {
	switch sp.opts.AuthnRequestBinding {
	case BindingPOST:
		return true
	case BindingRedirect:
		return false
	}
	return sp.cfg.IdPSSOServiceURL == "" && md.authn[0] == nil && md.authn[1] != nil
}

// BeginAt starts a sign-in at the IdP of the federation that tx names
// (tx.IdP), with the binding that IdP takes: it returns the URL to
// redirect the browser to and a nil form, or, for an IdP that takes
// AuthnRequests by HTTP-POST only (or with Options.AuthnRequestBinding),
// the URL and the form the browser posts there. It fills tx as Begin and
// BeginPost do, after one look-up of the IdP: with an MDQ server, one
// request at most.
func (sp *SP) BeginAt(ctx context.Context, tx *providers.Transaction) (action string, form url.Values, err error) {
	md, perr := sp.idpFor(ctx, tx.IdP)
	if perr != nil {
		return "", nil, perr
	}
	if sp.postsTo(md) {
		return sp.beginPost(md, tx)
	}
	action, err = sp.beginRedirect(md, tx)
	return action, nil, err
}

// BeginPost is Begin for the HTTP-POST binding: it fills tx as Begin does
// and returns the IdP's SSO location and the form the routes make the
// browser POST there. With the key pair the AuthnRequest carries an
// enveloped RSA-SHA256 XML signature, placed after its Issuer as the schema
// wants it. Custom entries are added to the form.
func (sp *SP) BeginPost(ctx context.Context, tx *providers.Transaction) (action string, form url.Values, err error) {
	md, perr := sp.idpFor(ctx, tx.IdP)
	if perr != nil {
		return "", nil, perr
	}
	return sp.beginPost(md, tx)
}

func (sp *SP) beginPost(md *idpMetadata, tx *providers.Transaction) (action string, form url.Values, err error) {
	t := md.authn[1]
	if t == nil {
		return "", nil, noSSO(BindingPOST)
	}
	o, err := sp.authnOptions(tx)
	if err != nil {
		return "", nil, err
	}
	id, handle, err := newIDs()
	if err != nil {
		return "", nil, err
	}
	var b bytes.Buffer
	now := sp.env.Now()
	t.write(&b, id, now, o)
	x := b.Bytes()
	if sp.key != nil {
		if x, err = sp.signEnveloped(x); err != nil {
			return "", nil, &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "cannot sign the SAML request", Err: err}
		}
	}
	sp.record(tx, id, handle, now, o)
	form = url.Values{}
	for _, p := range sp.cfg.Custom {
		form.Add(p.Name, p.Value)
	}
	form.Set("SAMLRequest", base64.StdEncoding.EncodeToString(x))
	form.Set("RelayState", handle)
	return t.dest, form, nil
}

var _ providers.PostStarter = (*SP)(nil)

func noSSO(binding string) *providers.Error {
	b := strings.TrimPrefix(binding, "urn:oasis:names:tc:SAML:2.0:bindings:")
	return &providers.Error{Code: providers.CodeMisconfigured, Provider: Name,
		Message: "the IdP metadata has no " + b + " single sign-on endpoint; set saml_idp_sso_service_url or Options.AuthnRequestBinding",
		Err:     fmt.Errorf("no SingleSignOnService with the %s binding in the IdP metadata", b)}
}

// record keeps in tx what the callback needs: the request ID, the
// RelayState handle, and where to go after sign-in; for a request that
// forced a new authentication, when it was issued. The routes default
// return_to to "/": an explicit path from the request wins, otherwise the
// configured RelayState is the destination.
func (sp *SP) record(tx *providers.Transaction, id, handle string, now time.Time, o *authnOptions) {
	tx.RequestID = id
	tx.Binding = handle
	if o != nil && o.forceAuthn {
		if tx.Extra == nil {
			tx.Extra = map[string]string{}
		}
		tx.Extra[forcedAtKey] = strconv.FormatInt(now.UnixMilli(), 10)
	}
	switch p, ok := SafeReturnPath(tx.ReturnTo, sp.origin); {
	case ok && p != "/":
		tx.ReturnTo = p
	case sp.relayDst != "":
		tx.ReturnTo = sp.relayDst
	default:
		tx.ReturnTo = "/"
	}
}

// newIDs returns a request ID (160 random bits, hex, as crewjam makes
// them) and a RelayState handle (128 bits, base64url: 22 bytes, well under
// the 80 bytes the binding allows), from one read of the random source.
func newIDs() (id, handle string, err error) {
	var r [36]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", "", fmt.Errorf("saml: random request ID: %w", err)
	}
	var b [3 + 40 + 22]byte
	copy(b[:], "id-")
	hex.Encode(b[3:43], r[:20])
	base64.RawURLEncoding.Encode(b[43:], r[20:])
	s := string(b[:])
	return s[:43], s[43:], nil
}

// Binding returns the RelayState of the IdP's answer: the handle Begin
// chose. The answer is a POST (a response, or an artifact), or a redirect
// whose query carries an artifact (the HTTP-Artifact binding).
func (sp *SP) Binding(r *http.Request) string {
	if err := sp.parseForm(r); err != nil {
		return ""
	}
	if r.Method != http.MethodPost {
		if len(r.Form["SAMLart"]) == 0 {
			return ""
		}
		return r.Form.Get("RelayState")
	}
	return r.PostForm.Get("RelayState")
}

// parseForm parses the callback form under our own bound when the routes
// have not parsed it already.
func (sp *SP) parseForm(r *http.Request) error {
	if r.PostForm != nil {
		return nil
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(nil, r.Body, sp.MaxCallbackBytes())
	}
	return r.ParseForm()
}

// authnTemplate is an AuthnRequest for one SSO endpoint with everything
// fixed but its ID and IssueInstant, so that a sign-in only fills in two
// values: no document to build, no serializer to run.
type authnTemplate struct {
	dest string
	// The request is head + ID + mid + IssueInstant + tail + context +
	// end; a sign-in with options adds attributes after IssueInstant and
	// may replace context.
	head, mid, tail, context, end string
	// query is what follows the SSO URL before SAMLRequest: "?" or the
	// URL's own query and "&".
	query string
}

// newAuthnTemplate writes the AuthnRequest crewjam would make, escaped
// once, for the SSO endpoint dest, asking for the Response by binding
// (ProtocolBinding).
func (sp *SP) newAuthnTemplate(dest, binding string) (*authnTemplate, error) {
	u, err := url.Parse(dest)
	if err != nil || !u.IsAbs() {
		return nil, fmt.Errorf("SSO location %q is not an absolute URL", dest)
	}
	var tail strings.Builder
	tail.WriteString(`"`) // closes IssueInstant
	a := func(name, value string) {
		tail.WriteString(" " + name + `="`)
		escapeXML(&tail, value)
		tail.WriteString(`"`)
	}
	a("Destination", dest)
	a("AssertionConsumerServiceURL", sp.acs.String())
	a("ProtocolBinding", binding)
	tail.WriteString(`><saml:Issuer Format="urn:oasis:names:tc:SAML:2.0:nameid-format:entity">`)
	escapeXML(&tail, sp.cfg.SPEntityID)
	tail.WriteString(`</saml:Issuer><samlp:NameIDPolicy`)
	a("Format", sp.opts.NameIDFormat)
	tail.WriteString(` AllowCreate="true"/>`)
	q := "?"
	if u.RawQuery != "" {
		q = "&"
	}
	return &authnTemplate{
		dest:    dest,
		head:    `<samlp:AuthnRequest xmlns:saml="` + nsAssertion + `" xmlns:samlp="` + nsProtocol + `" ID="`,
		mid:     `" Version="2.0" IssueInstant="`,
		tail:    tail.String(),
		context: requestedAuthnContext(strings.Fields(sp.cfg.AuthnContext)),
		end:     `</samlp:AuthnRequest>`,
		query:   q,
	}, nil
}

// requestedAuthnContext is the RequestedAuthnContext element asking for
// one of classes exactly, "" for none.
func requestedAuthnContext(classes []string) string {
	if len(classes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(`<samlp:RequestedAuthnContext Comparison="exact">`)
	for _, c := range classes {
		b.WriteString(`<saml:AuthnContextClassRef>`)
		escapeXML(&b, c)
		b.WriteString(`</saml:AuthnContextClassRef>`)
	}
	b.WriteString(`</samlp:RequestedAuthnContext>`)
	return b.String()
}

// write writes the request with id, issued at now, as o asks (nil: as
// configured).
func (t *authnTemplate) write(w *bytes.Buffer, id string, now time.Time, o *authnOptions) {
	w.WriteString(t.head)
	w.WriteString(id)
	w.WriteString(t.mid)
	w.Write(now.UTC().AppendFormat(w.AvailableBuffer(), "2006-01-02T15:04:05.000Z"))
	if o == nil {
		w.WriteString(t.tail)
		w.WriteString(t.context)
		w.WriteString(t.end)
		return
	}
	w.WriteString(t.tail[:1])
	if o.forceAuthn {
		w.WriteString(` ForceAuthn="true"`)
	}
	if o.isPassive {
		w.WriteString(` IsPassive="true"`)
	}
	w.WriteString(t.tail[1:])
	if o.context != "" {
		w.WriteString(o.context)
	} else {
		w.WriteString(t.context)
	}
	w.WriteString(t.end)
}

func escapeXML(b *strings.Builder, s string) {
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		default:
			b.WriteRune(r)
		}
	}
}

// deflateLevel is the DEFLATE level of the redirect binding. An
// AuthnRequest is about 700 bytes: compressing it saves some 300 bytes of
// URL but costs a Huffman table per request, 8 to 17 µs here, as much as all
// the rest of a sign-in start; stored DEFLATE blocks cost 0.07 µs and every
// inflater reads them (BenchmarkDeflateLevels; BENCHMARKS.md).
const deflateLevel = flate.NoCompression

// deflaters reuse DEFLATE writers: each holds a 64 KiB window.
var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, deflateLevel)
	return w
}}

// bufs reuse the scratch buffers of the redirect binding.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// redirectAuthnRequest fills in template t and encodes it for the redirect
// binding, recording the request in tx.
func (sp *SP) redirectAuthnRequest(t *authnTemplate, tx *providers.Transaction, now time.Time, o *authnOptions) (string, error) {
	id, handle, err := newIDs()
	if err != nil {
		return "", err
	}
	x := bufs.Get().(*bytes.Buffer)
	defer bufs.Put(x)
	x.Reset()
	t.write(x, id, now, o)
	u, err := sp.redirect(t.dest, t.query, "SAMLRequest", x.Bytes(), handle, sp.key != nil, sp.customQuery)
	if err != nil {
		return "", &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "cannot encode the SAML request", Err: err}
	}
	sp.record(tx, id, handle, now, o)
	return u, nil
}

// redirect encodes message for the HTTP-Redirect binding (SAML Bindings
// 3.4.4): DEFLATE, base64, then, when sign is set, an RSA-SHA256 signature
// over exactly "param=...&RelayState=...&SigAlg=..." as the binding defines
// it, whatever query the destination already has. extra (already encoded)
// follows the signed part.
func (sp *SP) redirect(dest, query, param string, message []byte, relayState string, sign bool, extra string) (string, error) {
	z := bufs.Get().(*bytes.Buffer)
	defer bufs.Put(z)
	z.Reset()
	fw := deflaters.Get().(*flate.Writer)
	fw.Reset(z)
	_, err := fw.Write(message)
	if err == nil {
		err = fw.Close()
	}
	deflaters.Put(fw)
	if err != nil {
		return "", err
	}
	n := base64.StdEncoding.EncodedLen(z.Len())
	out := make([]byte, 0, len(dest)+len(query)+len(param)+n*13/10+len(relayState)+len(extra)+600)
	out = append(out, dest...)
	out = append(out, query...)
	start := len(out)
	out = append(out, param...)
	out = append(out, '=')
	out = appendBase64Query(out, z.Bytes())
	if relayState != "" {
		out = append(out, "&RelayState="...)
		out = append(out, url.QueryEscape(relayState)...)
	}
	if sign {
		if sp.key == nil {
			return "", errors.New("signing needs the SP key pair")
		}
		out = append(out, "&SigAlg="...)
		out = append(out, url.QueryEscape(dsig.RSASHA256SignatureMethod)...)
		sum := sha256.Sum256(out[start:])
		sig, err := rsa.SignPKCS1v15(nil, sp.key, crypto.SHA256, sum[:])
		if err != nil {
			return "", err
		}
		out = append(out, "&Signature="...)
		out = appendBase64Query(out, sig)
	}
	if extra != "" {
		out = append(out, '&')
		out = append(out, extra...)
	}
	return string(out), nil
}

// appendBase64Query appends the base64 of b, query-escaped: of the
// alphabet, only +, / and = need escaping.
func appendBase64Query(out, b []byte) []byte {
	start := len(out)
	out = base64.StdEncoding.AppendEncode(out, b)
	enc := out[start:]
	extra := 0
	for _, c := range enc {
		if c == '+' || c == '/' || c == '=' {
			extra += 2
		}
	}
	if extra == 0 {
		return out
	}
	out = append(out, make([]byte, extra)...)
	// Expand in place, back to front.
	j := len(out) - 1
	for i := start + len(enc) - 1; i >= start; i-- {
		c := out[i]
		switch c {
		case '+', '/', '=':
			const hexd = "0123456789ABCDEF"
			out[j], out[j-1], out[j-2] = hexd[c&15], hexd[c>>4], '%'
			j -= 3
		default:
			out[j] = c
			j--
		}
	}
	return out
}

// signEnveloped signs the AuthnRequest x with an enveloped RSA-SHA256
// signature (exclusive canonicalization) and moves the signature right
// after the Issuer, where the schema puts it.
func (sp *SP) signEnveloped(x []byte) ([]byte, error) {
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(x); err != nil {
		return nil, err
	}
	ks := dsig.TLSCertKeyStore(tls.Certificate{Certificate: [][]byte{sp.cert.Raw}, PrivateKey: sp.key, Leaf: sp.cert})
	sc := dsig.NewDefaultSigningContext(ks)
	sc.Canonicalizer = dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("")
	if err := sc.SetSignatureMethod(dsig.RSASHA256SignatureMethod); err != nil {
		return nil, err
	}
	signed, err := sc.SignEnveloped(doc.Root())
	if err != nil {
		return nil, err
	}
	// SignEnveloped appends the signature without making it a proper
	// child (its parent is unset): take it off the list and insert it.
	sig, ok := signed.Child[len(signed.Child)-1].(*etree.Element)
	if !ok {
		return nil, errors.New("goxmldsig returned no signature")
	}
	signed.Child = signed.Child[:len(signed.Child)-1]
	issuer := signed.ChildElements()[0]
	signed.InsertChildAt(issuer.Index()+1, sig)
	out := etree.NewDocument()
	out.SetRoot(signed)
	return out.WriteToBytes()
}

// redirectURL encodes el for the redirect binding to dest (SLO messages).
func (sp *SP) redirectURL(dest, param string, el *etree.Element, relayState string, sign bool) (string, error) {
	doc := etree.NewDocument()
	doc.SetRoot(el)
	x, err := doc.WriteToBytes()
	if err != nil {
		return "", err
	}
	q := "?"
	if strings.Contains(dest, "?") {
		q = "&"
	}
	return sp.redirect(dest, q, param, x, relayState, sign, "")
}

// encodeCustom encodes the custom entries as a query, in the order the
// configuration gives them.
func encodeCustom(ps []Param) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(p.Name))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(p.Value))
	}
	return b.String()
}
