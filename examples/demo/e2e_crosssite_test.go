//go:build e2e

package main

// The SAML callback as browsers meet it in production: the application on
// HTTPS and the IdP on another site, so that the IdP's auto-submitting form
// is a cross-site POST. The other e2e tests serve the demo on plain HTTP
// with the development IdP on the demo's own origin, where the POST is
// same-site and a Lax cookie would do; only this test shows that the
// SameSite=None transaction cookie is what makes SAML work.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/extauth/extauth/extauthtest/samlidp"
)

// laxControl is a cookie shaped like the transaction cookie of an OAuth
// provider on HTTPS (__Host-, Path=/, Secure, HttpOnly, SameSite=Lax). The
// test sets it on the application's origin to show what SAML would lose with
// such a cookie: the browser keeps it from the IdP's cross-site POST. It
// must say SameSite=Lax explicitly: Chromium sends cookies without the
// attribute on cross-site POSTs for two minutes after they are set
// ("Lax-allowing-unsafe"), which would blur the control.
const laxControl = "__Host-e2e_lax_control"

// newLoopbackCert makes a self-signed certificate for both names the test
// uses, localhost (the application) and 127.0.0.1 (the IdP), and a pool
// that trusts it for the Go clients (the SP's metadata fetch, the IdP's).
func newLoopbackCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "extauth e2e"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// serveTLS serves h on ln with cert until the test ends.
func serveTLS(t *testing.T, ln net.Listener, h http.Handler, cert tls.Certificate, errLog *syncBuffer) {
	t.Helper()
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(errLog, "http: ", 0),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeTLS(ln, "", "")
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
}

// arrival is one request as the application received it.
type arrival struct {
	method, path string
	fetchSite    string   // Sec-Fetch-Site
	cookies      []string // the names of the cookies it carried
}

// recorder sits in front of the demo: it notes which cookies each request to
// the demo carried, and serves /e2e/lax-control, which sets laxControl.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	seen []arrival
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := arrival{method: r.Method, path: r.URL.Path, fetchSite: r.Header.Get("Sec-Fetch-Site")}
	for _, c := range r.Cookies() {
		a.cookies = append(a.cookies, c.Name)
	}
	rc.mu.Lock()
	rc.seen = append(rc.seen, a)
	rc.mu.Unlock()
	if r.URL.Path == "/e2e/lax-control" {
		http.SetCookie(w, &http.Cookie{Name: laxControl, Value: "1", Path: "/", Secure: true, HttpOnly: true,
			SameSite: http.SameSiteLaxMode, MaxAge: 600})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	rc.next.ServeHTTP(w, r)
}

func (rc *recorder) arrivals() []arrival {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.seen)
}

// crossSiteSAML is the demo on https://localhost:<port> and the development
// SAML IdP on https://127.0.0.1:<port>: two sites, as far as SameSite goes.
type crossSiteSAML struct {
	demo    *demo
	idpBase string
	rec     *recorder
}

func startCrossSiteSAML(t *testing.T) *crossSiteSAML {
	t.Helper()
	cert, roots := newLoopbackCert(t)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	t.Cleanup(client.CloseIdleConnections)
	appLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		appLn.Close()
		t.Fatal(err)
	}
	port := func(ln net.Listener) string { _, p, _ := net.SplitHostPort(ln.Addr().String()); return p }
	x := &crossSiteSAML{
		demo:    &demo{base: "https://localhost:" + port(appLn), log: &syncBuffer{}},
		idpBase: "https://127.0.0.1:" + port(idpLn),
	}
	idp, err := samlidp.New(samlidp.Options{
		BaseURL:       x.idpBase + "/saml",
		SPMetadataURL: x.demo.base + "/users/auth/saml/metadata",
		HTTPClient:    client,
	})
	if err != nil {
		appLn.Close()
		idpLn.Close()
		t.Fatal(err)
	}
	serveTLS(t, idpLn, idp, cert, x.demo.log)
	demoSrv, err := newServer(x.demo.base, serverOptions{
		logger:             slog.New(slog.NewTextHandler(x.demo.log, nil)),
		httpClient:         client,
		samlIdPMetadataURL: idp.MetadataURL(),
	})
	if err != nil {
		appLn.Close()
		t.Fatal(err)
	}
	x.demo.srv = demoSrv
	t.Cleanup(demoSrv.Close) // runs after the server below has stopped
	x.rec = &recorder{next: demoSrv}
	serveTLS(t, appLn, x.rec, cert, x.demo.log)
	return x
}

func TestE2ESAMLCrossSiteOverHTTPS(t *testing.T) {
	x := startCrossSiteSAML(t)
	// Only the test's own certificate is in question, and the Go clients
	// check it against the test's pool.
	b := startBrowser(t, chromedp.Flag("ignore-certificate-errors", true))
	tb := b.open(t, x.demo)
	const callback = "/users/auth/saml/callback"

	tb.do("setting the Lax control cookie", chromedp.Navigate(x.demo.base+"/e2e/lax-control"), chromedp.WaitVisible(chromedp.ID("signed-out")))
	tb.startSignIn("saml")
	if loc := tb.location(); !strings.HasPrefix(loc, x.idpBase+"/saml/") {
		t.Fatalf("sign-in led to %s, want the IdP's page under %s/saml/", loc, x.idpBase)
	}

	// While the user is at the IdP: the transaction cookie as the browser
	// keeps it, and the control beside it.
	var tx, lax *network.Cookie
	for _, c := range tb.cookies("/", callback) {
		switch {
		case c.Name == laxControl:
			lax = c
		case isTxCookie(c.Name, "saml"):
			if tx != nil {
				t.Fatalf("two SAML transaction cookies: %s and %s", tx.Name, c.Name)
			}
			tx = c
		}
	}
	if tx == nil {
		t.Fatal("no SAML transaction cookie in the browser while at the IdP")
	}
	if lax == nil || lax.SameSite != network.CookieSameSiteLax || !lax.Secure {
		t.Fatalf("the Lax control cookie is not in the browser as set: %+v", lax)
	}
	if !strings.HasPrefix(tx.Name, "__Secure-extauth_saml_") {
		t.Errorf("transaction cookie %s lacks the __Secure- prefix", tx.Name)
	}
	if tx.SameSite != network.CookieSameSiteNone {
		t.Errorf("%s has SameSite=%q, want None", tx.Name, tx.SameSite)
	}
	if !tx.Secure || !tx.HTTPOnly {
		t.Errorf("%s: Secure=%v HttpOnly=%v, want both", tx.Name, tx.Secure, tx.HTTPOnly)
	}
	if tx.Path != callback {
		t.Errorf("%s has Path=%q, want %q", tx.Name, tx.Path, callback)
	}
	// A domain cookie would read ".localhost".
	if tx.Domain != "localhost" {
		t.Errorf("%s is for domain %q, want the application's host only", tx.Name, tx.Domain)
	}
	expires := time.Unix(0, int64(tx.Expires*float64(time.Second)))
	if tx.Session || time.Until(expires) <= 0 || time.Until(expires) > maxTransaction {
		t.Errorf("%s expires at %v (session %v), want within 10 minutes", tx.Name, expires, tx.Session)
	}

	tb.do("approving at the IdP", click(`button[name=decision][value=approve]`))
	// The home page shows #uid; the failure page has the code in <code>.
	tb.do("waiting for the callback's outcome", chromedp.WaitVisible(chromedp.CSS("#uid, code")))
	if tb.status() != http.StatusOK {
		t.Fatalf("the callback failed with %d: %s", tb.status(), tb.text("body"))
	}
	if loc := tb.location(); loc != x.demo.base+"/" {
		t.Errorf("signed in at %s, want %s/", loc, x.demo.base)
	}
	if uid := tb.text("#uid"); uid != "ada@example.org" {
		t.Errorf("home page shows UID %q, want ada@example.org", uid)
	}
	if me := tb.fetch("/me.json"); me.Status != http.StatusOK || !strings.Contains(me.Body, `"provider":"saml"`) {
		t.Errorf("/me.json signed in: %d %s", me.Status, me.Body)
	}

	// What the application received: the IdP's POST, marked cross-site by
	// the browser, with the transaction cookie and without the Lax one;
	// then the redirect home, a top-level GET, where Lax cookies do go.
	seen := x.rec.arrivals()
	i := slices.IndexFunc(seen, func(a arrival) bool { return a.path == callback })
	if i < 0 {
		t.Fatalf("the callback never reached the application: %+v", seen)
	}
	post := seen[i]
	if post.method != http.MethodPost || post.fetchSite != "cross-site" {
		t.Errorf("the callback arrived as %s with Sec-Fetch-Site %q, want a cross-site POST", post.method, post.fetchSite)
	}
	if !slices.Contains(post.cookies, tx.Name) {
		t.Errorf("the cross-site POST did not carry the transaction cookie %s; it carried %q", tx.Name, post.cookies)
	}
	if slices.Contains(post.cookies, laxControl) {
		t.Errorf("the cross-site POST carried the SameSite=Lax control: the test is not cross-site")
	}
	if i+1 >= len(seen) || seen[i+1].path != "/" || !slices.Contains(seen[i+1].cookies, laxControl) {
		t.Errorf("the redirect home after the callback did not carry the Lax control; arrivals %+v", seen[i:])
	}
	for _, c := range tb.cookies("/", callback) {
		if isTxCookie(c.Name, "saml") {
			t.Errorf("%s is still in the browser after the callback", c.Name)
		}
	}

	// Single logout across the two sites: the IdP's LogoutResponse comes
	// back with a cross-site redirect, a top-level GET.
	n, before := tb.navigated(), len(x.rec.arrivals())
	tb.do("signing out", click("#logout"), chromedp.WaitVisible(chromedp.ID("signed-out")))
	want := []string{"POST /logout", "GET " + x.idpBase + "/saml/slo", "GET /users/auth/saml/logout", "GET /"}
	if got := tb.navigations(n); !slices.Equal(got, want) {
		t.Errorf("sign-out went through %q, want %q", got, want)
	}
	var back []string
	for _, a := range x.rec.arrivals()[before:] {
		if a.path == "/users/auth/saml/logout" {
			back = append(back, a.fetchSite)
		}
	}
	if !slices.Equal(back, []string{"cross-site"}) {
		t.Errorf("the logout route saw Sec-Fetch-Site %q, want cross-site (the IdP's LogoutResponse)", back)
	}
	if me := tb.fetch("/me.json"); me.Status != http.StatusNotFound {
		t.Errorf("/me.json after single logout: %d %s", me.Status, me.Body)
	}
}
