package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

type inner struct {
	Hook  func()
	Token string `redact:"secret"`
}

type outer struct {
	Name    string
	Key     []byte   `redact:"secret"`
	Keys    [][]byte `redact:"secret"`
	Empty   string   `redact:"secret"`
	Nested  inner
	Hooks   map[string]func()
	private string
}

func (o outer) Format(f fmt.State, verb rune) { Format(f, verb, o) }
func (o outer) MarshalJSON() ([]byte, error)  { return MarshalJSON(o) }

func TestViewRedactsAndDropsCode(t *testing.T) {
	o := outer{Name: "n", Key: []byte("k3y"), Keys: [][]byte{[]byte("old")}, Nested: inner{Hook: func() {}, Token: "t0ken"},
		Hooks: map[string]func(){"a": nil}, private: "p"}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q", "%d"} {
		got := fmt.Sprintf(verb, o)
		for _, leak := range []string{"k3y", "107 51 121", "6b3379", "old", "t0ken", "private"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s shows %q: %s", verb, leak, got)
			}
		}
	}
	if got := fmt.Sprintf("%+v", o); !strings.Contains(got, "Key:[REDACTED]") || !strings.Contains(got, "Empty:") || strings.Contains(got, "Empty:[REDACTED]") {
		t.Errorf("%%+v = %s: a set secret must show as redacted, an empty one as empty", got)
	}
	b, err := json.Marshal(o)
	if err != nil || strings.Contains(string(b), "t0ken") || strings.Contains(string(b), "Hook") {
		t.Errorf("json: %s %v", b, err)
	}
	var nilOuter *outer
	if View(nilOuter) != nil {
		t.Error("View of a nil pointer is not nil")
	}
}
