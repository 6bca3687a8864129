package pemdiag

import (
	"encoding/pem"
	"strings"
	"testing"
)

func TestBodyProblem(t *testing.T) {
	good := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(strings.Repeat("certificate bytes ", 10))}))
	lines := strings.Split(good, "\n")
	for _, tc := range []struct {
		name, in, want string
	}{
		{"a good block", good, ""},
		{"a character base64 does not use", strings.Replace(good, lines[2], lines[2][:10]+"*"+lines[2][11:], 1),
			"is a CERTIFICATE PEM block whose body is not base64: its 2nd line after -----BEGIN CERTIFICATE----- holds a character base64 does not use"},
		{"the 11th line", "-----BEGIN RSA PRIVATE KEY-----\n" + strings.Repeat("AAAA\n", 10) + "AA?A\n-----END RSA PRIVATE KEY-----\n",
			"is an RSA PRIVATE KEY PEM block whose body is not base64: its 11th line after -----BEGIN RSA PRIVATE KEY----- holds a character base64 does not use"},
		{"a line lost", strings.Replace(good, lines[1]+"\n", lines[1][:7]+"\n", 1),
			"is a CERTIFICATE PEM block whose body does not decode as base64: a line of it is cut short, lost or doubled"},
		{"headers, then a bad line", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAA!A\n-----END RSA PRIVATE KEY-----\n",
			"is an RSA PRIVATE KEY PEM block whose body is not base64: its 4th line after -----BEGIN RSA PRIVATE KEY----- holds a character base64 does not use"},
		// The BEGIN and END lines are at fault: Cause says so.
		{"types that differ", strings.Replace(good, "END CERTIFICATE", "END PRIVATE KEY", 1), ""},
		{"no END line", strings.Join(lines[:3], "\n"), ""},
		{"not PEM at all", "MIIB", ""},
	} {
		if got := BodyProblem(tc.in); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCause(t *testing.T) {
	good := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")}))
	for in, want := range map[string]string{
		"":     "",
		"MIIB": "; it has no -----BEGIN line: give the whole block, its BEGIN and END lines included",
		strings.ReplaceAll(strings.TrimSpace(good), "\n", `\n`):        `; its line breaks are written \n, as two characters, not as line breaks`,
		strings.ReplaceAll(good, "\n", " "):                            "; it is on one line: its line breaks were lost",
		strings.Split(good, "-----END")[0]:                             "; it has no -----END line, so it is cut short",
		strings.Replace(good, "END CERTIFICATE", "END PRIVATE KEY", 1): "; its BEGIN and END lines name different types",
	} {
		if got := Cause(in); got != want {
			t.Errorf("Cause(%.30q) = %q, want %q", in, got, want)
		}
	}
}
