package pages

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// Every language extauth ships has every message, with the placeholders
// of its English text and no other.
func TestBuiltinLanguagesAreComplete(t *testing.T) {
	for _, l := range builtin[1:] {
		for key, en := range english {
			text, ok := l.msgs[key]
			if !ok {
				t.Errorf("%s lacks %q", l.tag, key)
				continue
			}
			if !sameSet(text, en) {
				t.Errorf("%s %q fills %s, English %s", l.tag, key, placeholdersOf(text), placeholdersOf(en))
			}
		}
		for key := range l.msgs {
			if _, ok := english[key]; !ok {
				t.Errorf("%s has %q, which English has not", l.tag, key)
			}
		}
	}
}

func sameSet(a, b string) bool {
	x, y := strings.Split(placeholdersOf(a), ", "), strings.Split(placeholdersOf(b), ", ")
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func TestPrinter(t *testing.T) {
	s, err := New(map[string]map[string]string{"en": {"page.back": "Home ({site})"}, "pt-BR": {"confirm.button": "Continuar"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for lang, want := range map[string]string{
		"de-AT,de;q=0.9": "Weiter", "fr": "Continuer", "pt-BR": "Continuar", "pt": "Continuar", "sv": "Continue", "*": "Continue", "": "Continue",
	} {
		r.Header.Set("Accept-Language", lang)
		if got := s.For(r).T("confirm.button"); got != want {
			t.Errorf("Accept-Language %q: %q, want %q", lang, got, want)
		}
	}
	r.Header.Set("Accept-Language", "pt-BR")
	p := s.For(r)
	if got := p.T("confirm.lead", "provider", "Ada", "site", "app.example"); got != "Continue to sign in to app.example with Ada?" {
		// pt-BR has no confirm.lead: English.
		t.Errorf("fallback: %q", got)
	}
	r.Header.Set("Accept-Language", "en")
	if got := s.For(r).T("page.back", "site", "app.example"); got != "Home (app.example)" {
		t.Errorf("the host's English: %q", got)
	}
	if got := s.For(r).Count("discovery.count", 1) + " " + s.For(r).Count("discovery.count", 3); got != "1 organisation. 3 organisations." {
		t.Errorf("counts: %q", got)
	}
}

// A page's CSP allows exactly its stylesheets and, on a page that submits
// itself, the one script.
func TestWriteHeaders(t *testing.T) {
	s, err := New(nil, "main{border-color:#000}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(nil, "</style><script>x()</script>"); err == nil {
		t.Error("a stylesheet that closes the style element")
	}
	w := httptest.NewRecorder()
	s.For(httptest.NewRequest(http.MethodGet, "/", nil)).Write(w, Page{Kind: "redirect", Title: "T",
		Form: &Form{Action: "https://idp.example/sso", Auto: true, Button: "Go", Fields: []Field{{"SAMLRequest", `"><x`}}}})
	csp := w.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, hash(style)) || !strings.Contains(csp, hash("main{border-color:#000}")) || !strings.Contains(csp, "script-src "+autoSubmitHash) {
		t.Errorf("CSP %q", csp)
	}
	body := w.Body.String()
	if !strings.Contains(body, "<script>"+autoSubmit+"</script>") || !strings.Contains(body, `value="&#34;&gt;&lt;x"`) ||
		w.Header().Get("Referrer-Policy") != NoReferrer || !strings.Contains(body, `content="no-referrer"`) {
		t.Errorf("page:\n%v\n%s", w.Header(), body)
	}
}
