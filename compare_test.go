package extauth_test

import (
	"reflect"
	"testing"

	"github.com/extauth/extauth"
)

// A Secret holds its value behind a pointer (so that fmt never prints it),
// so == of two Secrets, or of two values holding one, would compare where
// the values are held: equal secrets would compare unequal. It must not
// compile instead; Secret.Equal and reflect.DeepEqual compare values.
// internal/apicheck's TestEveryTypeHoldingASecretIsNotComparable holds
// every exported type to the rule, and TestComparingSecretsDoesNotCompile
// type-checks what a host would write.
func TestSecretsCannotBeCompared(t *testing.T) {
	for _, v := range []any{
		extauth.Secret{}, extauth.OAuthProvider{}, extauth.OIDCConfig{}, extauth.OIDCAdditionalSettings{},
		extauth.SAMLConfig{}, extauth.SAMLAdditionalSettings{}, extauth.Config{}, extauth.Options{},
	} {
		if reflect.TypeOf(v).Comparable() {
			t.Errorf("%T is comparable with ==", v)
		}
	}
	a, b := extauth.NewSecret("s"), extauth.NewSecret("s")
	if !a.Equal(b) || a.Equal(extauth.NewSecret("t")) || !reflect.DeepEqual(a, b) || !extauth.NewSecret("").Equal(extauth.Secret{}) {
		t.Error("Secret.Equal or reflect.DeepEqual does not compare values")
	}
}
