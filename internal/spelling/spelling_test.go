package spelling

import "testing"

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b  string
		limit int
		want  int
	}{
		{"", "", 3, 0},
		{"secret", "secret", 3, 0},
		{"secert", "secret", 3, 1},
		{"twiter", "twitter", 3, 1},
		{"kitten", "sitting", 5, 3},
		{"abc", "ca", 5, 3},
		{"microblog_key", "socialnet_key", 3, 3},
		{"ab", "abcdef", 3, 3},
		{"uri", "url", 3, 1},
		{"ab", "ba", 3, 1},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b, tt.limit); got != tt.want {
			t.Errorf("Distance(%q, %q, %d) = %d, want %d", tt.a, tt.b, tt.limit, got, tt.want)
		}
		if got := Distance(tt.b, tt.a, tt.limit); got != tt.want {
			t.Errorf("Distance(%q, %q, %d) = %d, want %d", tt.b, tt.a, tt.limit, got, tt.want)
		}
	}
}

func TestNearest(t *testing.T) {
	methods := []string{"client_secret_basic", "client_secret_post", "client_secret_jwt", "private_key_jwt"}
	for in, want := range map[string]string{
		"private_key_jwk":   "private_key_jwt",
		"Private_Key_JWT":   "private_key_jwt",
		"client_secret_jtw": "client_secret_jwt",
		"magic":             "",
		"":                  "",
	} {
		if got := Nearest(in, methods, 2); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
}
