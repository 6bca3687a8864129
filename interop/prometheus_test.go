//go:build interop

package interop

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// operatingYAML returns the YAML blocks of docs/operating.md's Prometheus
// section: the scrape configuration, then the alert rules.
func operatingYAML(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []string
	var cur *strings.Builder
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "### Prometheus":
			in = true
		case in && strings.HasPrefix(line, "## "):
			in = false
		case in && cur == nil && line == "```yaml":
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if len(blocks) != 2 {
		t.Fatalf("docs/operating.md's Prometheus section has %d YAML blocks, want the scrape config and the rules", len(blocks))
	}
	return blocks
}

// ruleTests are promtool unit tests of the documented alert rules, on
// series named and labelled as the OpenTelemetry Prometheus exporter
// writes extauth's (the demo's /metrics, TestDemoMetrics).
const ruleTests = `rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-a",role="idp",use="verify",sha256="ab"}'
        values: '864000-60x180'
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-b",role="sp",use="sign+decrypt",sha256="cd"}'
        values: '60-60x180'
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-c",role="sp",use="sign+decrypt",sha256="ef"}'
        values: '31536000x180'
      # An IdP's rollover: its old certificate has expired, the new one is
      # valid for a year. Nothing breaks.
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-d",role="idp",use="verify",sha256="01"}'
        values: '-86400-60x180'
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-d",role="idp",use="verify",sha256="02"}'
        values: '31536000x180'
      # Every IdP signing certificate has expired: their keys still verify
      # (the metadata vouches for them), so a warning, not the critical
      # alert.
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-e",role="idp",use="verify",sha256="03"}'
        values: '-86400-60x180'
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-e",role="idp",use="verify",sha256="04"}'
        values: '60-60x180'
      # A rotation after the promotion: the retiring certificate has
      # expired (why it retires), the next one expires soon.
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-f",role="sp",use="sign+decrypt",sha256="05"}'
        values: '31536000x180'
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-f",role="sp",use="retiring",sha256="06"}'
        values: '-86400-60x180'
      - series: 'extauth_certificate_expiry_seconds{provider="saml",tenant="city-f",role="sp",use="decrypt",sha256="07"}'
        values: '864000-60x180'
    alert_rule_test:
      - eval_time: 2h
        alertname: ExtauthCertificateExpiresSoon
        exp_alerts:
          - exp_labels: {severity: warning, provider: saml, tenant: city-a, role: idp}
            exp_annotations: {summary: "idp certificate of saml at tenant 'city-a' expires in 9d 22h 0m 0s"}
          - exp_labels: {severity: warning, provider: saml, tenant: city-b, role: sp, sha256: cd}
            exp_annotations: {summary: "sp certificate of saml at tenant 'city-b' expires in -1h 59m 0s"}
          - exp_labels: {severity: warning, provider: saml, tenant: city-e, role: idp}
            exp_annotations: {summary: "idp certificate of saml at tenant 'city-e' expires in -1h 59m 0s"}
          - exp_labels: {severity: warning, provider: saml, tenant: city-f, role: sp, sha256: "07"}
            exp_annotations: {summary: "sp certificate of saml at tenant 'city-f' expires in 9d 22h 0m 0s"}
      - eval_time: 2h
        alertname: ExtauthCertificateExpired
        exp_alerts:
          - exp_labels: {severity: critical, provider: saml, tenant: city-b, role: sp, sha256: cd}
            exp_annotations: {summary: "sp certificate of saml at tenant 'city-b' has expired"}
  - interval: 1m
    input_series:
      - series: 'extauth_signin_completed_total{provider="oidc",tenant="city-a",outcome="success"}'
        values: '0+10x60'
      - series: 'extauth_signin_completed_total{provider="oidc",tenant="city-a",outcome="failure",code="provider_unavailable"}'
        values: '0+10x60'
      - series: 'extauth_signin_completed_total{provider="saml",tenant="city-a",outcome="success"}'
        values: '0+10x60'
      - series: 'extauth_signin_completed_total{provider="saml",tenant="city-a",outcome="failure",code="access_denied"}'
        values: '0+10x60'
    alert_rule_test:
      - eval_time: 40m
        alertname: ExtauthSignInFailureRate
        exp_alerts:
          - exp_labels: {severity: critical, provider: oidc, tenant: city-a}
            exp_annotations: {summary: "sign-ins with oidc at tenant 'city-a' are failing"}
  - interval: 1m
    input_series:
      # Fetched at 0, refreshes failing from 30 minutes on.
      - series: 'extauth_document_age_seconds{provider="saml",tenant="city-a",document="metadata"}'
        values: '0+60x180'
      - series: 'extauth_document_last_failure_time_seconds{provider="saml",tenant="city-a",document="metadata"}'
        values: '_x30 1800x150'
      # Failed once at 10 minutes, fetched again at 20: healthy.
      - series: 'extauth_document_age_seconds{provider="oidc",tenant="city-b",document="discovery"}'
        values: '0+60x19 0+60x160'
      - series: 'extauth_document_last_failure_time_seconds{provider="oidc",tenant="city-b",document="discovery"}'
        values: '_x10 600x170'
      # Never fetched.
      - series: 'extauth_document_last_failure_time_seconds{provider="oidc",tenant="city-c",document="discovery"}'
        values: '0x180'
      # Old.
      - series: 'extauth_document_age_seconds{provider="saml",tenant="city-d",document="metadata"}'
        values: '172000+60x180'
    alert_rule_test:
      - eval_time: 2h
        alertname: ExtauthDocumentRefreshFailing
        exp_alerts:
          - exp_labels: {severity: warning, provider: saml, tenant: city-a, document: metadata}
            exp_annotations: {summary: "metadata of saml at tenant 'city-a' does not refresh"}
      - eval_time: 2h
        alertname: ExtauthDocumentMissing
        exp_alerts:
          - exp_labels: {severity: critical, provider: oidc, tenant: city-c, document: discovery}
            exp_annotations: {summary: "oidc at tenant 'city-c' has no discovery: its sign-ins fail"}
      - eval_time: 2h
        alertname: ExtauthDocumentStale
        exp_alerts:
          - exp_labels: {severity: warning, provider: saml, tenant: city-d, document: metadata}
            exp_annotations: {summary: "metadata of saml at tenant 'city-d' is 2d 1h 46m 40s old"}
`

// The scrape configuration and the alert rules of docs/operating.md are
// valid for Prometheus's own promtool, each alert fires on series shaped
// like extauth's when it should, and no other does.
func TestPrometheusRulesInDocs(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: apt-get install prometheus")
	}
	blocks := operatingYAML(t)
	dir := t.TempDir()
	for name, body := range map[string]string{"prometheus.yml": blocks[0], "rules.yml": blocks[1], "rules_test.yml": ruleTests} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "config", "prometheus.yml"}, {"check", "rules", "rules.yml"}, {"test", "rules", "rules_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Every metric the rules read is one extauth has (TestDemoMetrics
	// and docs/operating.md's table name them).
	table, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`extauth_[a-z_]+`).FindAllString(blocks[1], -1) {
		if !strings.Contains(string(table), "`"+m+"`") {
			t.Errorf("the rules read %s, which the table of metrics does not list", m)
		}
	}
}
