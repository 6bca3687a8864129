package extauth

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/extauth/extauth/providers"
)

// fillNonZero sets every field of the struct v points to to a non-zero value,
// so a conversion that forgets a field shows.
func fillNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.ValueOf("k"), reflect.Zero(f.Type().Elem()))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
			fillNonZero(t, f.Elem())
		case reflect.Struct:
			if f.Type() == reflect.TypeOf(time.Time{}) {
				f.Set(reflect.ValueOf(time.Unix(1, 0)))
				continue
			}
			fillNonZero(t, f)
		default:
			t.Fatalf("fillNonZero: field %s of kind %s", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// The host's Identity and the strategies' must carry the same fields, and
// the conversions between them must lose none.
func TestIdentityConversionKeepsEveryField(t *testing.T) {
	// Fields the routes set, which strategies know nothing of.
	routesOnly := map[string]bool{"Tenant": true, "Unsolicited": true}
	host, strat := reflect.TypeOf(Identity{}), reflect.TypeOf(providers.Identity{})
	var hostFields []reflect.StructField
	for i := 0; i < host.NumField(); i++ {
		if !routesOnly[host.Field(i).Name] {
			hostFields = append(hostFields, host.Field(i))
		}
	}
	if len(hostFields) != strat.NumField() {
		t.Fatalf("Identity has %d fields besides the routes' own, providers.Identity %d", len(hostFields), strat.NumField())
	}
	for i, h := range hostFields {
		s := strat.Field(i)
		if h.Name != s.Name || h.Tag != s.Tag {
			t.Errorf("field %d: %s %q vs %s %q", i, h.Name, h.Tag, s.Name, s.Tag)
		}
	}
	var p providers.Identity
	fillNonZero(t, reflect.ValueOf(&p).Elem())
	back := identityFrom(&p).strategyIdentity()
	if !reflect.DeepEqual(&p, back) {
		t.Errorf("round trip lost fields:\n got %#v\nwant %#v", back, &p)
	}
}

func TestErrorIsMatchesCodeAndProvider(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", asError(providers.NewError(providers.CodeTimeout, "slow", errors.New("deadline")), "oidc", CodeInvalidResponse))
	if !errors.Is(err, &Error{Code: CodeTimeout}) || !errors.Is(err, &Error{Code: CodeTimeout, Provider: "oidc"}) {
		t.Errorf("errors.Is does not find the time-out in %v", err)
	}
	if errors.Is(err, &Error{Code: CodeTimeout, Provider: "saml"}) || errors.Is(err, &Error{Code: CodeReplayed}) {
		t.Errorf("errors.Is matches another provider or code in %v", err)
	}
	if got := asError(errors.New("boom"), "saml", CodeInvalidResponse); got.Code != CodeInvalidResponse || got.Provider != "saml" {
		t.Errorf("a plain error becomes %+v", got)
	}
	if got, want := err.Error(), "wrapped: extauth: oidc: timeout: slow: deadline"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
