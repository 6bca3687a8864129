package devpage

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A provider page is the layout around the page's own blocks, with the
// stylesheet inline and the page's text escaped.
func TestProvider(t *testing.T) {
	page := Provider("consent", "Microblog", `{{define "title"}}Authorize{{end}}{{define "main"}}<p>{{.}}</p>{{end}}`)
	var b strings.Builder
	if err := page.Execute(&b, "<script>"); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"<title>Authorize · Microblog (development)</title>",
		"<style>" + css + "</style>",
		`<span class="brand">Microblog</span>`,
		"<p>&lt;script&gt;</p>",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %.80q", want)
		}
	}
}

// The stylesheet is served with its type and an ETag it can be revalidated
// with.
func TestHandler(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/style.css", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != css || rec.Header().Get("Content-Type") != "text/css; charset=utf-8" {
		t.Fatalf("%d %s", rec.Code, rec.Header())
	}
	req := httptest.NewRequest(http.MethodGet, "/style.css", nil)
	req.Header.Set("If-None-Match", rec.Header().Get("ETag"))
	rec = httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("revalidation: %d, %d bytes", rec.Code, rec.Body.Len())
	}
}
