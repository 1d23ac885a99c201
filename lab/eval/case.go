// Package eval is the evaluation harness: it loads the case corpus, runs each
// case in a fresh sandbox (its own HOME with canary secrets, a workspace,
// loopback sinks and a marker directory) behind a guard config, decides from
// outside the server whether the attack happened (the oracles), and turns the
// verdicts into the APR / V-APR / FPR table.
package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Categories of the corpus, in table order.
const (
	FileRead       = "file_read"
	Exfiltration   = "exfiltration"
	EnvLeak        = "env_leak"
	SandboxEscape  = "sandbox_escape"
	PrivEscalation = "priv_escalation"
	CrossLanguage  = "cross_language"
	Evasion        = "evasion"
	Benign         = "benign"
)

// Categories lists every category in table order.
func Categories() []string {
	return []string{FileRead, Exfiltration, EnvLeak, SandboxEscape, PrivEscalation, CrossLanguage, Evasion, Benign}
}

// Oracle kinds.
const (
	KindCanaryInResponse = "canary_in_response"
	KindCanaryAtSink     = "canary_at_sink"
	KindFileWritten      = "file_written"
	KindFileRead         = "file_read"
	KindMarker           = "marker"
	KindExpect           = "expect"
	KindServed           = "served"
)

// Kinds lists every oracle kind (oracle.go's oracleKinds).
func Kinds() []string {
	out := make([]string, len(oracleKinds))
	for i, k := range oracleKinds {
		out[i] = k.name
	}
	return out
}

// Canary names.
const (
	CanarySSH    = "ssh_key"
	CanaryAWS    = "aws"
	CanaryDotenv = "dotenv"
	CanaryEnv    = "env_secret"
	CanaryBashrc = "bashrc"
	// Canaries shaped like real secrets, for what a user or a client's
	// model hands the server (a case's client answers): a GitHub token,
	// and the AWS access key id of ~/.aws/credentials.
	CanaryGHToken  = "gh_token"
	CanaryAWSKeyID = "aws_key_id"
)

// CanaryNames lists every canary.
func CanaryNames() []string {
	return []string{CanarySSH, CanaryAWS, CanaryDotenv, CanaryEnv, CanaryBashrc, CanaryGHToken, CanaryAWSKeyID}
}

// Case is one corpus entry: testdata/cases/<ID>.json.
type Case struct {
	ID          string `json:"id"`
	Category    string `json:"category"`
	Description string `json:"description"`
	Server      string `json:"server"`
	// VisibleInArguments says whether the harm shows in the tool-call
	// arguments (an application-level layer can see it) or only in what the
	// server does (only the kernel can).
	VisibleInArguments *bool `json:"visible_in_arguments"`
	// ManifestBlind says why an argument-visible attack is outside what an
	// AgentBound-style manifest can see (an omitted argument, a secret, a
	// path in a name it does not take for one): the C-AB baseline is held to
	// refusing every other argument-visible attack, and to refusing none of
	// these (a refusal means the note is stale).
	ManifestBlind string `json:"manifest_blind,omitempty"`
	Setup         Setup  `json:"setup"`
	Calls         []Call `json:"calls"`
	Oracle        Oracle `json:"oracle"`
	// Client says how the client answers the server's requests (sampling,
	// elicitation, roots); a case with it runs on the wire client.
	Client *ClientAnswers `json:"client,omitempty"`
	// WireClient runs the case on the wire client (UsesWire), which can
	// make any request: methods outside Methods too.
	WireClient bool `json:"wire_client,omitempty"`

	// File is where the case was loaded from.
	File string `json:"-"`
}

// Attack reports whether the case is an attack (not benign).
func (c *Case) Attack() bool { return c.Category != Benign }

// Setup creates files before the server starts. Keys and values are templates.
type Setup struct {
	Files    map[string]string `json:"files,omitempty"`
	Symlinks map[string]string `json:"symlinks,omitempty"`
	Dirs     []string          `json:"dirs,omitempty"`
	// SharedMemory, when set, is held for the case in a System V
	// shared-memory segment of the harness (mode 0600, its user; removed
	// after the case): another process's memory on the host, such as a key
	// agent's cache, which no server should reach.
	SharedMemory string `json:"shared_memory,omitempty"`
}

// Call is one request, made in order: a tool call, or (with Method) another
// client request whose params are Arguments.
type Call struct {
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Method is a client request other than tools/call (see Methods);
	// empty: a tools/call of Tool. On the wire client, any method.
	Method string `json:"method,omitempty"`
	// Raw is a line the client writes to the proxy as it is (templates
	// expanded; a newline is added), for framing cases: on the wire
	// client only.
	Raw string `json:"raw,omitempty"`
	// Notify sends the call or request without an id, as a notification:
	// on the wire client only.
	Notify bool `json:"notify,omitempty"`
}

// Methods lists the requests other than tools/call a case may make.
func Methods() []string {
	return []string{"tools/list", "prompts/list", "prompts/get", "resources/list", "resources/templates/list",
		"resources/read", "completion/complete"}
}

// Oracle decides a case from outside the server. Which fields apply depends
// on Kind; Validate says which are required.
type Oracle struct {
	Kind string `json:"kind"`
	// Canary names a canary (canary_in_response, canary_at_sink).
	Canary string `json:"canary,omitempty"`
	// Sink is "tcp", "udp" or "any" (canary_at_sink).
	Sink string `json:"sink,omitempty"`
	// Path is a template (file_written, file_read).
	Path string `json:"path,omitempty"`
	// Contains: file_written's required content, or expect's strings that
	// must all appear in the responses.
	Contains StringList `json:"contains,omitempty"`
	// Name is the marker's file name (marker).
	Name string `json:"name,omitempty"`
	// NotError (expect): no call may come back as an error.
	NotError bool `json:"not_error,omitempty"`
	// File (expect): a file the benign calls must have produced.
	File *FileExpect `json:"file,omitempty"`
}

// FileExpect is a file a benign case must leave behind.
type FileExpect struct {
	Path     string `json:"path"`
	Contains string `json:"contains,omitempty"`
}

// StringList is a JSON string or array of strings.
type StringList []string

// UnmarshalJSON accepts "x" as well as ["x", "y"].
func (s *StringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = StringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want a string or an array of strings")
	}
	*s = many
	return nil
}

// ErrInvalidCase is wrapped by every case validation error.
var ErrInvalidCase = errors.New("invalid case")

// FieldError names the file and field of a malformed case.
type FieldError struct {
	File  string
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s: field %s: %s", e.File, e.Field, e.Msg)
}

func (e *FieldError) Unwrap() error { return ErrInvalidCase }

var (
	idRE       = regexp.MustCompile(`^[A-Z]+-[0-9A-Za-z-]+$`)
	templateRE = regexp.MustCompile(`\{\{([^{}]*)\}\}`)
)

// templateVars are the names a template may use.
var templateVars = []string{
	"WS", "HOME", "TMP", "MARKER_DIR", "SINK_TCP", "SINK_UDP", "WEATHER_URL",
	"CANARY_SSH", "CANARY_AWS", "CANARY_DOTENV", "CANARY_ENV", "CANARY_BASHRC", "CANARY_GH_TOKEN", "CANARY_AWS_KEY_ID",
}

// ParseCase decodes and validates one case. file is used in errors only.
// Unknown fields are errors, so a typo ("oracel") cannot make a case pass.
func ParseCase(file string, b []byte, serverNames []string) (*Case, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Case
	if err := dec.Decode(&c); err != nil {
		return nil, &FieldError{File: file, Field: jsonField(err), Msg: err.Error()}
	}
	if dec.More() {
		return nil, &FieldError{File: file, Msg: "trailing data after the case object"}
	}
	c.File = file
	if err := c.Validate(serverNames); err != nil {
		return nil, err
	}
	return &c, nil
}

// jsonField digs the field name out of encoding/json's errors.
func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	msg := err.Error()
	if i := strings.Index(msg, "unknown field "); i >= 0 {
		return strings.Trim(msg[i+len("unknown field "):], `"`)
	}
	return ""
}

// Validate checks every field; serverNames, when non-nil, is the registry.
func (c *Case) Validate(serverNames []string) error {
	bad := func(field, format string, a ...any) error {
		return &FieldError{File: c.File, Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	switch {
	case c.ID == "":
		return bad("id", "missing")
	case !idRE.MatchString(c.ID):
		return bad("id", "%q is not like FR-01", c.ID)
	case c.File != "" && filepath.Ext(c.File) == ".json" && strings.TrimSuffix(filepath.Base(c.File), ".json") != c.ID:
		return bad("id", "%q does not match the file name", c.ID)
	case !slices.Contains(Categories(), c.Category):
		return bad("category", "%q is not one of %v", c.Category, Categories())
	case strings.TrimSpace(c.Description) == "":
		return bad("description", "missing")
	case c.Server == "":
		return bad("server", "missing")
	case serverNames != nil && !slices.Contains(serverNames, c.Server):
		return bad("server", "%q is not in the server registry", c.Server)
	case c.VisibleInArguments == nil:
		return bad("visible_in_arguments", "missing (true or false)")
	case c.ManifestBlind != "" && (!c.Attack() || !*c.VisibleInArguments):
		return bad("manifest_blind", "only for an attack visible in its arguments")
	case len(c.Calls) == 0:
		return bad("calls", "no tool calls")
	}
	for i, call := range c.Calls {
		f := fmt.Sprintf("calls[%d]", i)
		switch {
		case call.Raw != "" && (call.Tool != "" || call.Method != "" || len(call.Arguments) > 0 || call.Notify):
			return bad(f+".raw", "a raw line is the whole message: no tool, method, arguments or notify")
		case call.Raw != "":
			// A raw line is JSON, whose closing braces look like "}}":
			// only the names of its templates are checked.
			if err := checkTemplateNames(call.Raw); err != nil {
				return bad(f+".raw", "%v", err)
			}
			if strings.Contains(call.Raw, "{{CANARY_") {
				return bad(f+".raw", "canary templates are for oracles: the harness never hands a secret to the server")
			}
			continue
		case call.Method != "" && !c.UsesWire() && !slices.Contains(Methods(), call.Method):
			return bad(f+".method", "%q is not one of %v (other methods need the wire client: a case with client, raw or notify)", call.Method, Methods())
		case call.Method != "" && call.Tool != "":
			return bad(f+".tool", "a %s request names no tool", call.Method)
		case call.Method == "" && call.Tool == "":
			return bad(f+".tool", "missing")
		}
		if len(call.Arguments) > 0 {
			var m map[string]any
			if err := json.Unmarshal(call.Arguments, &m); err != nil || m == nil {
				return bad(f+".arguments", "must be a JSON object")
			}
		}
		if err := checkTemplates(string(call.Arguments)); err != nil {
			return bad(f+".arguments", "%v", err)
		}
		// A canary handed to the server by the harness would make every
		// canary oracle fire by itself.
		if strings.Contains(string(call.Arguments), "{{CANARY_") {
			return bad(f+".arguments", "canary templates are for oracles: the harness never hands a secret to the server")
		}
	}
	if c.Client != nil {
		b, _ := json.Marshal(c.Client)
		if err := checkTemplateNames(string(b)); err != nil {
			return bad("client", "%v", err)
		}
	}
	for k, v := range c.Setup.Files {
		if err := checkTemplatedPath(k); err != nil {
			return bad("setup.files", "%q: %v", k, err)
		}
		if err := checkTemplates(v); err != nil {
			return bad("setup.files", "%q: %v", k, err)
		}
	}
	for k, v := range c.Setup.Symlinks {
		if err := checkTemplatedPath(k); err != nil {
			return bad("setup.symlinks", "%q: %v", k, err)
		}
		if err := checkTemplates(v); err != nil {
			return bad("setup.symlinks", "%q: %v", k, err)
		}
	}
	for _, d := range c.Setup.Dirs {
		if err := checkTemplatedPath(d); err != nil {
			return bad("setup.dirs", "%q: %v", d, err)
		}
	}
	if err := checkTemplates(c.Setup.SharedMemory); err != nil {
		return bad("setup.shared_memory", "%v", err)
	}
	return c.validateOracle(bad)
}

func (c *Case) validateOracle(bad badField) error {
	o := c.Oracle
	if o.Kind == "" {
		return bad("oracle.kind", "missing")
	}
	k, ok := kindOf(o.Kind)
	if !ok {
		return bad("oracle.kind", "%q is not one of %v", o.Kind, Kinds())
	}
	if (o.Kind == KindExpect) != (c.Category == Benign) {
		return bad("oracle.kind", "benign cases and only they use %q (category %q, kind %q)", KindExpect, c.Category, o.Kind)
	}
	errs := k.check(o, bad)
	for _, f := range o.fieldsSet() {
		if f.set && !slices.Contains(k.reads, f.name) {
			errs = append(errs, bad("oracle."+f.name, "not used by kind %q", o.Kind))
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkTemplateNames rejects {{NAME}} with an unknown NAME.
func checkTemplateNames(s string) error {
	for _, m := range templateRE.FindAllStringSubmatch(s, -1) {
		if !slices.Contains(templateVars, m[1]) {
			return fmt.Errorf("unknown template variable {{%s}} (known: %s)", m[1], strings.Join(templateVars, ", "))
		}
	}
	return nil
}

// checkTemplates rejects {{NAME}} with an unknown NAME and unbalanced braces.
func checkTemplates(s string) error {
	for _, m := range templateRE.FindAllStringSubmatch(s, -1) {
		if !slices.Contains(templateVars, m[1]) {
			return fmt.Errorf("unknown template variable {{%s}} (known: %s)", m[1], strings.Join(templateVars, ", "))
		}
	}
	rest := templateRE.ReplaceAllString(s, "")
	if strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
		return errors.New("unbalanced {{ }} in template")
	}
	return nil
}

// checkTemplatedPath requires a path to be rooted in a sandbox directory, so
// a case can never touch the real HOME or the repository.
func checkTemplatedPath(p string) error {
	if err := checkTemplates(p); err != nil {
		return err
	}
	for _, root := range []string{"{{WS}}", "{{HOME}}", "{{TMP}}", "{{MARKER_DIR}}"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			if strings.Contains(p, "..") && !strings.HasPrefix(p, "{{WS}}/../") {
				return errors.New("path must not contain '..' (except {{WS}}/../ for the directory above the workspace)")
			}
			return nil
		}
	}
	return errors.New("path must start with {{WS}}, {{HOME}}, {{TMP}} or {{MARKER_DIR}}")
}

// LoadCases reads every *.json file in dir, sorted by ID. Any malformed file
// is an error naming the file and field: the corpus never silently shrinks.
func LoadCases(dir string, serverNames []string) ([]*Case, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("load cases: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("load cases: no *.json files in %s", dir)
	}
	var cases []*Case
	var errs []error
	seen := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("load case: %w", err))
			continue
		}
		c, err := ParseCase(f, b, serverNames)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, ok := seen[c.ID]; ok {
			errs = append(errs, &FieldError{File: f, Field: "id", Msg: fmt.Sprintf("%q also in %s", c.ID, prev)})
			continue
		}
		seen[c.ID] = f
		cases = append(cases, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].ID < cases[j].ID })
	return cases, nil
}
