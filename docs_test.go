package extauth_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The documentation is README.md, CHANGELOG.md, docs/*.md, the READMEs of
// api/ and testdata/upgrade/, and examples/*/README.md. Two rules keep it honest:
// every relative link resolves (the file exists, and an #anchor names one of
// its headings), and every Go snippet is code that compiles, because it is
// part of an Example function.

// docPages returns README.md, CHANGELOG.md, every page under docs/, the
// READMEs of the API record and of the earlier releases' state, and those
// of the example programs.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob("examples/*/README.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(append([]string{"README.md", "CHANGELOG.md", "api/README.md", "testdata/upgrade/README.md"}, pages...), examples...)
	if len(pages) < 2 {
		t.Fatalf("found no docs pages beside README.md: %v", pages)
	}
	return pages
}

// mdLine is one line of a Markdown page, with whether it is inside a fenced
// code block and, for fence openings, the block's info string.
type mdLine struct {
	n       int // 1-based
	text    string
	inFence bool
}

type codeBlock struct {
	lang  string
	start int // line of the opening fence
	lines []string
}

// readMarkdown splits a page into its lines and fenced code blocks.
func readMarkdown(t *testing.T, path string) ([]mdLine, []codeBlock) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		lines  []mdLine
		blocks []codeBlock
		cur    *codeBlock
		fence  string
	)
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		switch {
		case cur == nil && openingFence(trimmed) != "":
			fence = openingFence(trimmed)
			info := strings.Fields(trimmed[len(fence):])
			lang := ""
			if len(info) > 0 {
				lang = strings.ToLower(info[0])
			}
			blocks = append(blocks, codeBlock{lang: lang, start: n})
			cur = &blocks[len(blocks)-1]
			lines = append(lines, mdLine{n, text, true})
		case cur != nil && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "":
			cur = nil
			lines = append(lines, mdLine{n, text, true})
		case cur != nil:
			cur.lines = append(cur.lines, text)
			lines = append(lines, mdLine{n, text, true})
		default:
			lines = append(lines, mdLine{n, text, false})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Errorf("%s:%d: code block never closed", path, cur.start)
	}
	return lines, blocks
}

// openingFence returns the run of backticks or tildes that opens a fenced
// code block on this (trimmed) line, or "" when the line opens none. As in
// CommonMark, a backtick fence's info string holds no backtick, so that
// "```` ```go ```` block" is inline code, not a fence.
func openingFence(line string) string {
	for _, c := range "`~" {
		run := strings.TrimLeft(line, string(c))
		n := len(line) - len(run)
		if n < 3 {
			continue
		}
		if c == '`' && strings.Contains(run, "`") {
			return ""
		}
		return line[:n]
	}
	return ""
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchors returns the anchors GitHub gives the headings of a page: the
// heading's text, lowercased, without punctuation, spaces turned into
// hyphens; a repeated one gets -1, -2, ...
func anchors(lines []mdLine) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines {
		if l.inFence {
			continue
		}
		m := atxHeading.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		a := slug(m[2])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// slug applies GitHub's heading-anchor rule to a heading's Markdown text.
func slug(heading string) string {
	text := inlineLink.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Security": "security",
		"Callback URL to register with each provider":                  "callback-url-to-register-with-each-provider",
		"microblog (Twitter-style OAuth 1.0a)":                         "microblog-twitter-style-oauth-10a",
		"Registering with Google (`search_oauth2`)":                    "registering-with-google-search_oauth2",
		"`extauth keygen`":                                             "extauth-keygen",
		"Tunables (`extauth.Options.OIDC`, a `providers.OIDCOptions`)": "tunables-extauthoptionsoidc-a-providersoidcoptions",
		"The [demo](x.md) *now*":                                       "the-demo-now",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestOpeningFence(t *testing.T) {
	for line, want := range map[string]string{
		"```go":                     "```",
		"````":                      "````",
		"~~~ yaml":                  "~~~",
		"``not a fence":             "",
		"```` ```go ```` is inline": "",
		"~~~ a `tilde` fence":       "~~~",
		"text":                      "",
	} {
		if got := openingFence(line); got != want {
			t.Errorf("openingFence(%q) = %q, want %q", line, got, want)
		}
	}
}

// TestDocsLinks checks every relative link of README.md and docs/*.md: the
// target exists and, for a Markdown target, the #anchor is one of its
// headings.
func TestDocsLinks(t *testing.T) {
	pages := docPages(t)
	headings := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := headings[path]; ok {
			return a
		}
		lines, _ := readMarkdown(t, path)
		headings[path] = anchors(lines)
		return headings[path]
	}
	checked := 0
	for _, page := range pages {
		lines, _ := readMarkdown(t, page)
		for _, l := range lines {
			if l.inFence {
				continue
			}
			text := codeSpan.ReplaceAllString(l.text, "")
			for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
				target := m[2]
				u, err := url.Parse(target)
				if err != nil {
					t.Errorf("%s:%d: link %q does not parse: %v", page, l.n, target, err)
					continue
				}
				if u.Scheme != "" || u.Host != "" {
					continue // absolute: not ours to check offline
				}
				checked++
				file := page
				if u.Path != "" {
					file = filepath.Join(filepath.Dir(page), filepath.FromSlash(u.Path))
				}
				info, err := os.Stat(file)
				if err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, l.n, target, file)
					continue
				}
				if u.Fragment == "" {
					continue
				}
				if info.IsDir() || !strings.HasSuffix(file, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into %s, which is not a Markdown page", page, l.n, target, file)
					continue
				}
				if a := anchorsOf(file); !a[u.Fragment] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s (it has: %s)",
						page, l.n, target, file, u.Fragment, strings.Join(slices.Sorted(mapKeys(a)), " "))
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link at all: the link pattern is broken")
	}
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// compiledCode is a body of Go code that the build compiles: an Example
// function's body, or a whole file of the examples/ programs.
type compiledCode struct {
	where string
	lines []string // trimmed, blank lines left out
}

// compiledCodes collects the bodies of every Example function in the
// repository's _test.go files and every .go file under examples/.
func compiledCodes(t *testing.T) []compiledCode {
	t.Helper()
	var out []compiledCode
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		srcLines := strings.Split(string(src), "\n")
		if strings.HasPrefix(filepath.ToSlash(path), "examples/") {
			out = append(out, compiledCode{path, codeLines(srcLines)})
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Example") {
				continue
			}
			from := fset.Position(fn.Body.Lbrace).Line // the body starts after the brace's line
			to := fset.Position(fn.Body.Rbrace).Line - 1
			if to < from {
				continue // a one-line body holds no snippet
			}
			out = append(out, compiledCode{fmt.Sprintf("%s %s", path, fn.Name.Name), codeLines(srcLines[from:to])})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// codeLines trims every line and leaves out the blank ones, so that a
// snippet matches whatever its indentation and spacing in the Example.
func codeLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// contains reports whether want appears in have, contiguously, in order.
func contains(have, want []string) bool {
	for i := 0; i+len(want) <= len(have); i++ {
		if slices.Equal(have[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// longestPrefix returns how many leading lines of want appear contiguously
// somewhere in one of the codes, for a failure message that points at the
// first line that differs.
func longestPrefix(codes []compiledCode, want []string) (int, string) {
	best, where := 0, ""
	for _, c := range codes {
		for n := len(want); n > best; n-- {
			if contains(c.lines, want[:n]) {
				best, where = n, c.where
				break
			}
		}
	}
	return best, where
}

// TestDocsGoSnippetsAreCompiled enforces the snippet rule: every ```go
// block of README.md and docs/*.md appears, line for line (indentation and
// blank lines aside), in the body of an Example function of a _test.go file,
// or in a program under examples/, so that it compiles and, with an Output
// comment, runs.
func TestDocsGoSnippetsAreCompiled(t *testing.T) {
	codes := compiledCodes(t)
	if len(codes) == 0 {
		t.Fatal("found no Example function: the search is broken")
	}
	snippets := 0
	for _, page := range docPages(t) {
		_, blocks := readMarkdown(t, page)
		for _, b := range blocks {
			if b.lang != "go" {
				continue
			}
			snippets++
			want := codeLines(b.lines)
			if len(want) == 0 {
				t.Errorf("%s:%d: empty go block", page, b.start)
				continue
			}
			if slices.ContainsFunc(codes, func(c compiledCode) bool { return contains(c.lines, want) }) {
				continue
			}
			n, where := longestPrefix(codes, want)
			if n == 0 {
				t.Errorf("%s:%d: go block is in no Example function (first line %q)", page, b.start, want[0])
				continue
			}
			t.Errorf("%s:%d: go block differs from %s at its line %q (the %d lines before it match)",
				page, b.start, where, want[n], n)
		}
	}
	if snippets == 0 {
		t.Fatal("found no go block in the docs: the fence pattern is broken")
	}
}

var repoURL = regexp.MustCompile(`https://github\.com/extauth/extauth/blob/main/([^\s)"'>\x60]+)`)

// TestRepoURLsResolve checks the links into this repository that must be
// absolute, such as those of the package documentation: each names a file
// that exists and, with an #anchor into a Markdown page, one of its headings.
func TestRepoURLsResolve(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range repoURL.FindAllStringSubmatch(string(src), -1) {
			checked++
			file, fragment, _ := strings.Cut(strings.TrimRight(m[1], ".,;:"), "#")
			if _, err := os.Stat(filepath.FromSlash(file)); err != nil {
				t.Errorf("%s: %s names %s, which does not exist", path, m[0], file)
				continue
			}
			if fragment == "" {
				continue
			}
			lines, _ := readMarkdown(t, filepath.FromSlash(file))
			if !anchors(lines)[fragment] {
				t.Errorf("%s: %s: %s has no heading with anchor #%s", path, m[0], file, fragment)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("found no link into the repository: the package documentation should link the guides")
	}
}

// The README opens with the two commands a newcomer runs, exactly, and
// says truthfully what the first of them does on a fresh machine: that it
// downloads modules (go: downloading lines) before it compiles, for the
// CPU time docs/development.md reports as measured.
func TestReadmeFirstRun(t *testing.T) {
	_, blocks := readMarkdown(t, "README.md")
	want := []string{
		"go run ./examples/demo   # the demo, offline, on built-in development providers: http://127.0.0.1:3000",
		"go test ./...            # the tests, hermetic and offline",
	}
	if len(blocks) == 0 || blocks[0].lang != "sh" || !slices.Equal(blocks[0].lines, want) {
		t.Fatalf("README.md does not open with the two commands:\n%q", blocks[0].lines)
	}
	cpu := regexp.MustCompile(`about (\d+) CPU-seconds`)
	figures := map[string]string{}
	for _, page := range []string{"README.md", "docs/development.md"} {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(data)), " ")
		_, first, ok := strings.Cut(text, "The first `go run ./examples/demo` on a fresh machine")
		first, _, _ = strings.Cut(first, "later runs")
		m := cpu.FindStringSubmatch(first)
		if !ok || !strings.Contains(first, "`go: downloading`") || m == nil {
			t.Errorf("%s does not say that the first go run ./examples/demo downloads modules (go: downloading) and how many CPU-seconds it compiles: %q", page, first)
			continue
		}
		figures[page] = m[1]
	}
	if len(figures) == 2 && figures["README.md"] != figures["docs/development.md"] {
		t.Errorf("README.md says about %s CPU-seconds, docs/development.md about %s", figures["README.md"], figures["docs/development.md"])
	}
}

// README.md is the front door: under 14 KB (14,000 bytes), the depth in
// docs/. A section that grows past it moves there, with a link.
func TestReadmeIsShort(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(data); n >= 14_000 {
		t.Errorf("README.md is %d bytes; keep it under 14,000, and move the depth to docs/", n)
	}
}

// docs/several-instances.md lists what every instance must share, the
// application's own session store among them, and says as many things as
// it lists.
func TestSeveralInstancesList(t *testing.T) {
	data, err := os.ReadFile("docs/several-instances.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), "behind a load balancer needs")
	intro, list, _ := strings.Cut(rest, "\n\n")
	list, _, _ = strings.Cut(list, "\n\n")
	items := regexp.MustCompile(`(?m)^\d+\. `).Split(list, -1)[1:]
	numbers := []string{"zero", "one", "two", "three", "four", "five", "six"}
	if len(items) == 0 || len(items) >= len(numbers) {
		t.Fatalf("no list of what instances share: %q", list)
	}
	if !strings.HasPrefix(strings.TrimSpace(intro), numbers[len(items)]+" things") {
		t.Errorf("the page says it needs %q and lists %d things", strings.TrimSpace(intro), len(items))
	}
	shared := false
	for _, it := range items {
		it = strings.Join(strings.Fields(it), " ")
		if strings.Contains(it, "session store") && strings.Contains(it, "OnProviderLogout") {
			shared = true
		}
	}
	if !shared {
		t.Errorf("no item says that the application's own session store must be shared:\n%s", list)
	}
}
