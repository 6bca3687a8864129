package extauth_test

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/extauth/extauth"
	"golang.org/x/oauth2"
)

// BenchmarkAuthorize measures the shared authorize handler for blog_oauth2
// (transaction, sealing, cookie, redirect) beside a baseline that does the
// least a hand-rolled x/oauth2 handler must: random state and verifier, the
// authorization URL, a plain cookie and the redirect. Compare the two
// sub-benchmarks' ns/op for the cost of what extauth adds.
func BenchmarkAuthorize(b *testing.B) {
	a, err := extauth.New(&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "https://blog.example"}},
		extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("extauth/blog_oauth2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, newRequest(http.MethodPost, "https://app.example/users/auth/blog_oauth2", nil))
			if rec.Code != http.StatusSeeOther {
				b.Fatal(rec.Code)
			}
		}
	})
	conf := &oauth2.Config{ClientID: "k", ClientSecret: "s", RedirectURL: "https://app.example/users/auth/blog_oauth2/callback",
		Endpoint: oauth2.Endpoint{AuthURL: "https://blog.example/oauth/authorize", TokenURL: "https://blog.example/oauth/token"}}
	baseline := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := make([]byte, 32)
		rand.Read(st)
		state := base64.RawURLEncoding.EncodeToString(st)
		verifier := oauth2.GenerateVerifier()
		http.SetCookie(w, &http.Cookie{Name: "state", Value: state + "." + verifier, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
		http.Redirect(w, r, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), http.StatusSeeOther)
	})
	b.Run("baseline/x_oauth2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			baseline.ServeHTTP(rec, newRequest(http.MethodPost, "https://app.example/users/auth/blog_oauth2", nil))
		}
	})
}
