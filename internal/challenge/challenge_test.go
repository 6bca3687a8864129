package challenge

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		headers []string
		want    string
	}{
		// RFC 9110 11.6.1's example: two challenges in one value.
		{[]string{`Basic realm="simple", Newauth realm="apps", type=1, title="Login to \"apps\""`},
			`[basic map[realm:simple]] [newauth map[realm:apps title:Login to "apps" type:1]]`},
		// RFC 9449 9's, quoted and not, and in the second place.
		{[]string{`DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"`},
			`[dpop map[error:use_dpop_nonce error_description:Resource server requires nonce in DPoP proof]]`},
		{[]string{`Bearer realm="api", DPoP algs="ES256 PS256", error=use_dpop_nonce`},
			`[bearer map[realm:api]] [dpop map[algs:ES256 PS256 error:use_dpop_nonce]]`},
		{[]string{`Bearer realm="api"`, `dpop ERROR = "use_dpop_nonce"`},
			`[bearer map[realm:api]] [dpop map[error:use_dpop_nonce]]`},
		// A token68, padded or not, belongs to its scheme; the bare
		// token after a comma is the next scheme.
		{[]string{`Negotiate abc/+==, Bearer realm="api"`}, `[negotiate map[]] [bearer map[realm:api]]`},
		{[]string{`Negotiate abc, DPoP error="use_dpop_nonce"`}, `[negotiate map[]] [dpop map[error:use_dpop_nonce]]`},
		{[]string{`Basic, DPoP`}, `[basic map[]] [dpop map[]]`},
		// A parameter named twice keeps its first value.
		{[]string{`DPoP error="invalid_token", error="use_dpop_nonce"`}, `[dpop map[error:invalid_token]]`},
		// What does not parse ends the value, keeping what came before.
		{[]string{`Bearer realm="api", DPoP error="use_dpop_nonce`}, `[bearer map[realm:api]] [dpop map[]]`},
		{[]string{`error="use_dpop_nonce"`}, ``},
		{[]string{`DPoP error=`}, `[dpop map[]]`},
		{nil, ``},
	} {
		cs, ok := Parse(http.Header{"Www-Authenticate": tc.headers})
		var got []string
		for _, c := range cs {
			got = append(got, fmt.Sprint([]any{c.Scheme, c.Params}))
		}
		if !ok || strings.Join(got, " ") != tc.want {
			t.Errorf("Parse(%q) = %s, %v; want %s", tc.headers, strings.Join(got, " "), ok, tc.want)
		}
	}
}

// Headers past MaxBytes, together, are not read at all.
func TestParseBounded(t *testing.T) {
	pad := `Bearer realm="` + strings.Repeat("a", MaxBytes/2) + `"`
	for _, h := range [][]string{
		{pad + `, DPoP error="use_dpop_nonce"` + strings.Repeat(" ", MaxBytes/2)},
		{pad, pad, `DPoP error="use_dpop_nonce"`},
	} {
		if cs, ok := Parse(http.Header{"Www-Authenticate": h}); ok || cs != nil {
			t.Errorf("%d bytes of headers read: %v", len(strings.Join(h, "")), cs)
		}
	}
	if cs, ok := Parse(http.Header{"Www-Authenticate": {pad, `DPoP error="use_dpop_nonce"`}}); !ok || len(cs) != 2 {
		t.Errorf("headers within the bound: %v, %v", cs, ok)
	}
}
