package samlidp

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestUnsolicitedNeedsAutoApprove(t *testing.T) {
	idp, err := New(Options{BaseURL: "http://127.0.0.1:1/idp"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	idp.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/idp/unsolicited?sp=https://sp.example", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("unsolicited without AutoApprove: %d %s", rec.Code, rec.Body)
	}
}
