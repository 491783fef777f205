// Package kubeindex_test holds the tests of the repository's documents:
// that ARCHITECTURE.md names only files and Go names that exist, that
// every relative link in the documents resolves, and that the commands the
// documents mark as runnable against --demo run as written.
package kubeindex_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// documents are the Markdown files whose links are checked, relative to the
// repository root (this test's directory).
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md", "ARCHITECTURE.md", "BENCHMARKS.md"}, docs...)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goNames is what the repository's Go files declare and use, read with
// go/parser so that comments never count: a name only a comment mentions
// does not exist.
type goNames struct {
	idents   map[string]bool            // every identifier in code
	strs     map[string]bool            // every string literal's value
	strWords map[string]bool            // every identifier-like word of a string literal (JSON members, struct tags)
	funcs    map[string]bool            // top-level functions (tests, benchmarks, fuzz targets)
	topLevel map[string]map[string]bool // package name → its top-level declarations
	members  map[string]map[string]bool // type name → its methods and fields (all packages)
	types    map[string]bool            // declared type names
}

var (
	namesOnce sync.Once
	names     *goNames
	namesErr  error
)

// repoGoNames parses every .go file under the repository root, the test
// modules included, once per test binary.
func repoGoNames(t *testing.T) *goNames {
	t.Helper()
	namesOnce.Do(func() { names, namesErr = parseRepo(".") })
	if namesErr != nil {
		t.Fatal(namesErr)
	}
	return names
}

func parseRepo(root string) (*goNames, error) {
	n := &goNames{
		idents: map[string]bool{}, strs: map[string]bool{}, strWords: map[string]bool{}, funcs: map[string]bool{},
		topLevel: map[string]map[string]bool{}, members: map[string]map[string]bool{},
		types: map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		n.add(f)
		return nil
	})
	return n, err
}

func (n *goNames) member(typ, name string) {
	if n.members[typ] == nil {
		n.members[typ] = map[string]bool{}
	}
	n.members[typ][name] = true
}

func (n *goNames) add(f *ast.File) {
	pkg := strings.TrimSuffix(f.Name.Name, "_test")
	if n.topLevel[pkg] == nil {
		n.topLevel[pkg] = map[string]bool{}
	}
	top := n.topLevel[pkg]
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				top[d.Name.Name] = true
				n.funcs[d.Name.Name] = true
			} else if len(d.Recv.List) == 1 {
				n.member(receiverType(d.Recv.List[0].Type), d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					top[s.Name.Name] = true
					n.types[s.Name.Name] = true
					n.typeMembers(s.Name.Name, s.Type)
				case *ast.ValueSpec:
					for _, id := range s.Names {
						top[id.Name] = true
					}
				}
			}
		}
	}
	ast.Inspect(f, func(node ast.Node) bool {
		switch x := node.(type) {
		case *ast.Ident:
			n.idents[x.Name] = true
		case *ast.BasicLit:
			if x.Kind == token.STRING {
				if s, err := strconv.Unquote(x.Value); err == nil {
					n.strs[s] = true
					for _, w := range wordRE.FindAllString(s, -1) {
						n.strWords[w] = true
					}
				}
			}
		}
		return true
	})
}

// typeMembers records a struct's fields (embedded ones by their type's
// name) and an interface's methods as members of the type.
func (n *goNames) typeMembers(typ string, expr ast.Expr) {
	var fields *ast.FieldList
	switch t := expr.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, id := range f.Names {
			n.member(typ, id.Name)
		}
		if len(f.Names) == 0 {
			if name := receiverType(f.Type); name != "" {
				n.member(typ, name)
			}
		}
	}
}

// receiverType is the bare type name of a receiver or embedded field:
// T, *T, T[P], pkg.T.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

var wordRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

var (
	codeSpan   = regexp.MustCompile("`([^`\n]+)`")
	goIdent    = regexp.MustCompile(`^\*?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\(\))?$`)
	repoPath   = regexp.MustCompile(`^[A-Za-z0-9_.*-]+(/[A-Za-z0-9_.*-]+)*/?$`)
	testFunc   = regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Z0-9_]`)
	benchFlag  = regexp.MustCompile(`-(bench|run) +('[^']*'|\S+)`)
	pkgArg     = regexp.MustCompile(`(?:^| )\./([A-Za-z0-9_/]+?)(?:/\.\.\.)?(?: |$)`)
	fileSuffix = regexp.MustCompile(`\.(go|md|json|yaml|yml|png|mod)$`)
)

// externalQualifiers are the import names of packages outside this
// repository that ARCHITECTURE.md qualifies names with; what they name is
// not this repository's to check.
var externalQualifiers = map[string]bool{
	"metav1": true, "meta": true, "rest": true, "netip": true, "http": true, "watch": true,
	"json": true, "runtime": true,
}

// TestArchitectureNamesExist holds ARCHITECTURE.md to the code: each file
// path it puts in backticks exists, each Go name exists in code (comments
// do not count), each test, benchmark and fuzz target is declared, and
// each `go test` command names packages and benchmarks that exist. Other
// changes move files and rename functions; this is what keeps the map
// true.
func TestArchitectureNamesExist(t *testing.T) {
	doc := readFile(t, "ARCHITECTURE.md")
	n := repoGoNames(t)
	seen := map[string]bool{}
	var missing []string
	for i, line := range strings.Split(doc, "\n") {
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			span := m[1]
			if seen[span] {
				continue
			}
			seen[span] = true
			if why := checkSpan(n, span); why != "" {
				missing = append(missing, "ARCHITECTURE.md:"+strconv.Itoa(i+1)+": `"+span+"`: "+why)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("ARCHITECTURE.md names what the repository does not hold; update the map:\n%s", strings.Join(missing, "\n"))
	}
}

// checkSpan returns why span names nothing that exists, or "" when it does
// or is not a claim about the repository (a URL path, a flag, JSON, a
// phrase).
func checkSpan(n *goNames, span string) string {
	switch {
	case strings.HasPrefix(span, "go test "), strings.HasPrefix(span, "go list "):
		return checkGoCommand(n, span)
	case strings.ContainsAny(span, " :=\"<{[,'") || strings.HasPrefix(span, "-") || strings.HasPrefix(span, "/"):
		return ""
	case strings.Contains(span, "/") || fileSuffix.MatchString(span):
		return checkPath(span)
	case goIdent.MatchString(span):
		return checkIdent(n, strings.TrimSuffix(strings.TrimPrefix(span, "*"), "()"))
	}
	return ""
}

// checkPath checks a repository path (a glob allowed). Paths whose first
// element is not a directory of the repository (benchmark sub-names such
// as build/unstructured, import paths such as k8s.io/api) are not claims
// about files. A bare file name (routes.go) must exist somewhere.
func checkPath(span string) string {
	if !repoPath.MatchString(span) {
		return ""
	}
	first, _, nested := strings.Cut(span, "/")
	if nested {
		if fi, err := os.Stat(first); err != nil || !fi.IsDir() {
			return ""
		}
		matches, err := filepath.Glob(strings.TrimSuffix(span, "/"))
		if err != nil || len(matches) == 0 {
			return "no such file or directory"
		}
		return ""
	}
	if !fileSuffix.MatchString(span) {
		return ""
	}
	found := false
	filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == span {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	if !found {
		return "no file of that name"
	}
	return ""
}

// checkIdent checks a Go name: a test, benchmark or fuzz target must be
// declared; pkg.Name must be declared at the top level of a package of
// that name, or Type.Member be a method or field of a type of that name;
// anything else must be an identifier somewhere in code, or a word of a
// string the code holds (a JSON member such as metadata.managedFields).
func checkIdent(n *goNames, name string) string {
	parts := strings.Split(name, ".")
	if len(parts) == 1 && testFunc.MatchString(name) {
		if !n.funcs[name] {
			return "no such test, benchmark or fuzz target"
		}
		return ""
	}
	if len(parts) > 1 && externalQualifiers[parts[0]] {
		return ""
	}
	if n.strs[name] {
		return ""
	}
	if len(parts) >= 2 {
		top, isPkg := n.topLevel[parts[0]]
		isType := n.types[parts[0]]
		switch {
		case isPkg && top[parts[1]]:
			parts = parts[1:]
		case isType && n.members[parts[0]][parts[1]]:
		case isPkg && isType:
			return "neither package " + parts[0] + " nor type " + parts[0] + " declares " + parts[1]
		case isPkg:
			return "package " + parts[0] + " declares no " + parts[1]
		case isType:
			return "type " + parts[0] + " has no method or field " + parts[1]
		}
		for i := 1; i+1 < len(parts); i++ {
			if n.types[parts[i]] && !n.members[parts[i]][parts[i+1]] {
				return "type " + parts[i] + " has no method or field " + parts[i+1]
			}
		}
	}
	for _, p := range parts {
		if !n.idents[p] && !n.strWords[p] {
			return p + " is not in any Go file's code"
		}
	}
	return ""
}

// checkGoCommand checks a `go test` or `go list` command: the packages it
// names exist, and each alternative of its -bench and -run patterns names a
// declared benchmark or test (XXX and ^$ mean "none").
func checkGoCommand(n *goNames, cmd string) string {
	var why []string
	for _, m := range pkgArg.FindAllStringSubmatch(cmd, -1) {
		if fi, err := os.Stat(m[1]); err != nil || !fi.IsDir() {
			why = append(why, "no package ./"+m[1])
		}
	}
	for _, m := range benchFlag.FindAllStringSubmatch(cmd, -1) {
		prefix := "Test"
		if m[1] == "bench" {
			prefix = "Benchmark"
		}
		for _, alt := range strings.Split(strings.Trim(m[2], "'"), "|") {
			alt, _, _ = strings.Cut(alt, "/")
			alt = strings.Trim(alt, "^$")
			if alt == "" || alt == "XXX" || alt == "." {
				continue
			}
			if !hasFuncMatching(n, prefix, alt) {
				why = append(why, "no "+prefix+" function matches "+alt)
			}
		}
	}
	return strings.Join(why, "; ")
}

func hasFuncMatching(n *goNames, prefix, pattern string) bool {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return false
	}
	for f := range n.funcs {
		if strings.HasPrefix(f, prefix) && re.MatchString(f) {
			return true
		}
	}
	return false
}

var (
	mdLink    = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
	fence     = regexp.MustCompile("(?ms)^```.*?^```")
)

// TestDocumentLinksResolve checks every relative link of the documents:
// the file exists, and an anchor names one of its headings.
func TestDocumentLinksResolve(t *testing.T) {
	var broken []string
	for _, doc := range documents(t) {
		text := fence.ReplaceAllStringFunc(readFile(t, doc), func(s string) string {
			return strings.Repeat("\n", strings.Count(s, "\n"))
		})
		for i, line := range strings.Split(text, "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				if why := checkLink(doc, m[1]); why != "" {
					broken = append(broken, doc+":"+strconv.Itoa(i+1)+": "+m[1]+": "+why)
				}
			}
		}
	}
	if len(broken) > 0 {
		t.Errorf("broken links:\n%s", strings.Join(broken, "\n"))
	}
}

func checkLink(doc, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	path := doc
	if file != "" {
		path = filepath.Join(filepath.Dir(doc), file)
		if _, err := os.Stat(path); err != nil {
			return "no such file"
		}
	}
	if anchor == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "cannot read " + path + " for its anchors"
	}
	if !slices.Contains(anchors(string(b)), anchor) {
		return "no heading with anchor #" + anchor + " in " + path
	}
	return ""
}

// anchors are the anchors GitHub gives a Markdown file's headings: lower
// case, punctuation dropped, spaces as hyphens, repeats numbered.
func anchors(text string) []string {
	text = fence.ReplaceAllString(text, "")
	var out []string
	count := map[string]int{}
	for _, m := range mdHeading.FindAllStringSubmatch(text, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127 && r != '—' && r != '–' && r != '…' && r != '→':
				b.WriteRune(r)
			}
		}
		a := b.String()
		if c := count[a]; c > 0 {
			out = append(out, a+"-"+strconv.Itoa(c))
		} else {
			out = append(out, a)
		}
		count[a]++
	}
	return out
}

// modulePath is the root module's path; imports under it are kubeindex's.
const modulePath = "github.com/kubeindex/kubeindex"

// TestArchitectureImportGraph holds the import graph ARCHITECTURE.md draws
// (the first fenced block of "Packages, and which way imports point") to
// what go list reports for the root module's packages: every arrow drawn
// is an import, every import between kubeindex packages is drawn, and
// every package is in the drawing (one that imports no kubeindex package
// on the "no kubeindex package" line). A package added or an import
// changed fails here until the map says so.
func TestArchitectureImportGraph(t *testing.T) {
	drawn, leaves, err := drawnGraph(readFile(t, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-f", "{{if .GoFiles}}{{.ImportPath}} {{join .Imports \" \"}}{{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	actual := map[string]map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], modulePath), "/")
		actual[pkg] = map[string]bool{}
		for _, imp := range fields[1:] {
			if rest, ok := strings.CutPrefix(imp, modulePath+"/"); ok {
				actual[pkg][rest] = true
			}
		}
	}
	var wrong []string
	for _, pkg := range slices.Sorted(maps.Keys(actual)) {
		imports := actual[pkg]
		_, isDrawn := drawn[pkg]
		switch {
		case !isDrawn && !leaves[pkg]:
			wrong = append(wrong, fmt.Sprintf("package %s is not drawn (imports: %s)", pkg, orNone(imports)))
		case leaves[pkg] && len(imports) > 0:
			wrong = append(wrong, fmt.Sprintf("%s is drawn as importing no kubeindex package, but imports %s", pkg, orNone(imports)))
		}
		for _, imp := range slices.Sorted(maps.Keys(imports)) {
			if isDrawn && !drawn[pkg][imp] {
				wrong = append(wrong, fmt.Sprintf("%s imports %s: no arrow drawn", pkg, imp))
			}
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(drawn)) {
		if _, ok := actual[pkg]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s is drawn but is no package of the module", pkg))
			continue
		}
		for _, imp := range slices.Sorted(maps.Keys(drawn[pkg])) {
			if !actual[pkg][imp] {
				wrong = append(wrong, fmt.Sprintf("%s → %s is drawn but %s does not import it", pkg, imp, pkg))
			}
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(leaves)) {
		if _, ok := actual[pkg]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s is drawn but is no package of the module", pkg))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("ARCHITECTURE.md's import graph differs from go list; redraw it:\n%s", strings.Join(wrong, "\n"))
	}
}

func orNone(set map[string]bool) string {
	if len(set) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(set)), ", ")
}

// drawnGraph reads the arrows "a, b  →  c, d  (comment)" of the first
// fenced block after the packages heading; "→  no kubeindex package" marks
// leaves.
func drawnGraph(doc string) (map[string]map[string]bool, map[string]bool, error) {
	_, after, ok := strings.Cut(doc, "## Packages, and which way imports point")
	if !ok {
		return nil, nil, errors.New(`ARCHITECTURE.md has no "## Packages, and which way imports point" heading`)
	}
	_, after, ok = strings.Cut(after, "```\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		return nil, nil, errors.New("no fenced block under the packages heading")
	}
	drawn, leaves := map[string]map[string]bool{}, map[string]bool{}
	list := func(s string) []string {
		if i := strings.Index(s, "("); i >= 0 {
			s = s[:i]
		}
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	for _, line := range strings.Split(block, "\n") {
		from, to, ok := strings.Cut(line, "→")
		if !ok {
			continue
		}
		if strings.TrimSpace(to) == "no kubeindex package" {
			for _, p := range list(from) {
				leaves[p] = true
			}
			continue
		}
		for _, p := range list(from) {
			if drawn[p] == nil {
				drawn[p] = map[string]bool{}
			}
			for _, q := range list(to) {
				drawn[p][q] = true
			}
		}
	}
	if len(drawn) == 0 {
		return nil, nil, errors.New("the packages block draws no arrow")
	}
	return drawn, leaves, nil
}
