package jsonrpc

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of objects and arrays a message may have.
// Python's json gives up near 1000 levels and JavaScript engines somewhat
// later; refusing well below both means no server parser fails on a
// message the guard judged.
const MaxDepth = 512

// Errors the scanner returns besides the ones Parse always had. A message
// that one parser could read differently from another is refused rather
// than judged: the guard and the server must see the same values.
var (
	// ErrDuplicateKey: an object has the same key twice (after unescaping).
	// Parsers disagree on which one counts (first, last, or an error).
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrCaseKey: two keys of an object differ only in case, or a key of
	// the envelope or of params differs only in case from a member the
	// guard reads. Go's encoding/json matches keys case-insensitively, so a
	// server written with it reads such a key where the guard does not.
	ErrCaseKey = errors.New("key differs only in case")
	// ErrLoneSurrogate: a \u escape names half of a UTF-16 surrogate pair.
	// Go replaces it with U+FFFD, Python and JavaScript keep it.
	ErrLoneSurrogate = errors.New("lone UTF-16 surrogate escape")
	// ErrTooDeep: nesting deeper than MaxDepth.
	ErrTooDeep = errors.New("nested too deep")
	// ErrBadMethod: method is not a string, or is empty.
	ErrBadMethod = errors.New("method must be a non-empty string")
	// ErrBadError: error is not an object.
	ErrBadError = errors.New("error must be an object")
	// ErrLineBreak: a CR inside a message (Scanner.Strict). In JSON it can
	// only be whitespace between tokens, and the readers MCP servers and
	// clients use (Python's universal newlines, Node's readline) end a line
	// there: they would read two messages where the guard read one.
	ErrLineBreak = errors.New("carriage return inside a message (readers split lines there)")
	// ErrMixedKinds: a message with the members of two kinds (a method
	// and a result or an error, or a result and an error; Scanner.Strict).
	// Readers pick one by their own order: the TypeScript SDK refuses the
	// message, Python's pydantic union takes the first kind that fits, a
	// client that looks for "result" first reads a request's result as the
	// answer to its own request, which the guard judged as something else.
	ErrMixedKinds = errors.New("message has the members of two kinds (method, result, error): readers differ on which it is")
)

// SyntaxError is malformed JSON: the message cannot be read at all.
type SyntaxError struct {
	Offset int // byte offset in the message where reading failed
	msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.msg)
}

// Span is a value's byte range in a scanned message: line[Off:End]. The
// zero Span means the member is absent (no JSON value is empty).
type Span struct{ Off, End int }

// Present reports whether the member was there.
func (s Span) Present() bool { return s.End > s.Off }

// In returns the value's bytes in line, nil when absent.
func (s Span) In(line []byte) []byte {
	if !s.Present() {
		return nil
	}
	return line[s.Off:s.End:s.End]
}

// Envelope is one message as the scanner read it: its kind and the byte
// ranges of the members the guard reads, into the scanned line. Nothing is
// copied; the spans are valid as long as the line is.
type Envelope struct {
	Kind Kind
	// Members of the envelope. ID is present for a request with "id": null.
	ID, Method, Params, Result, Error Span
	// Members of params, when params is an object.
	Name, Arguments, URI Span
	// MethodName is the method, unescaped ("" when absent).
	MethodName string
	// Canonical reports that the line is already in the canonical
	// encoding (see AppendCanonical): no whitespace between tokens, and
	// every string escaped exactly as AppendCanonical escapes it.
	Canonical bool
}

// Scanner reads messages in one pass: it checks the JSON grammar, UTF-8,
// escapes and nesting, refuses duplicate keys in every object of the
// message, and records where the envelope's members are. A Scanner is
// reused from message to message so that its buffers are; it is not safe
// for concurrent use.
type Scanner struct {
	// Strict refuses a CR anywhere in the message (ErrLineBreak): the
	// guard judges what it forwards, and a reader that ends lines at a CR
	// would read something else. Off, a CR is whitespace (a byte relay
	// judges nothing).
	Strict bool

	b     []byte
	pos   int
	depth int
	keys  []keyRef // keys of the open objects, innermost last
	arena []byte   // unescaped keys
	env   Envelope

	err     error // the first error that does not stop the scan
	errOff  int
	idBad   bool // the id cannot be trusted for the reply (duplicated, or broken)
	version bool // "jsonrpc": "2.0" was there
	recode  bool // the line is not in the canonical encoding
}

// keyRef is a key of an open object: b[off:off+n], or arena[off:off+n]
// when n has arenaBit. Eight bytes, so that a wide object's keys cost
// less than the object (every key takes at least five bytes of it).
type keyRef struct {
	off, n uint32
}

const arenaBit = 1 << 31

// maxScan is the largest message the Scanner indexes (keyRef's offsets).
const maxScan = arenaBit - 1

// member names the guard reads, in the envelope and in params.
type member uint8

const (
	mNone member = iota
	mJSONRPC
	mID
	mMethod
	mParams
	mResult
	mError
	mName
	mArguments
	mURI
)

var envelopeMembers = []struct {
	name string
	m    member
}{{"jsonrpc", mJSONRPC}, {"id", mID}, {"method", mMethod}, {"params", mParams}, {"result", mResult}, {"error", mError}}

var paramsMembers = []struct {
	name string
	m    member
}{{"name", mName}, {"arguments", mArguments}, {"uri", mURI}}

type role uint8

const (
	roleValue role = iota
	roleEnvelope
	roleParams
)

// Scan reads one message. On an error the Envelope still carries the id
// when it could be read reliably, so that the error reply goes to it.
// Errors: *SyntaxError for malformed JSON, or one wrapping ErrNotObject,
// ErrInvalidUTF8, ErrLoneSurrogate, ErrDuplicateKey, ErrCaseKey,
// ErrTooDeep, ErrBadVersion, ErrBadID, ErrBadMethod, ErrBadError,
// ErrNoMethodOrResult, and under Strict ErrLineBreak and ErrMixedKinds.
func (s *Scanner) Scan(line []byte) (Envelope, error) {
	s.b, s.pos, s.depth = line, 0, 0
	s.keys, s.arena = s.keys[:0], s.arena[:0]
	s.env = Envelope{}
	s.err, s.errOff, s.idBad, s.version, s.recode = nil, 0, false, false, false
	defer func() { s.b = nil }()

	if len(line) > maxScan {
		return Envelope{}, fmt.Errorf("%w: over %d bytes", ErrTooLarge, maxScan)
	}
	s.ws()
	if s.pos == len(s.b) {
		return Envelope{}, ErrNotObject
	}
	top := s.b[s.pos]
	var err error
	if top == '{' {
		err = s.object(roleEnvelope)
	} else {
		err = s.value()
	}
	if err == nil {
		s.ws()
		if s.pos != len(s.b) {
			err = s.syntax("data after the message")
		}
	}
	if err != nil {
		return Envelope{}, err
	}
	if top != '{' {
		return Envelope{}, ErrNotObject
	}
	env := s.env
	if s.idBad || (s.err != nil && s.errOff >= env.ID.Off && s.errOff < env.ID.End) {
		env.ID = Span{}
	}
	if s.err != nil {
		return env, fmt.Errorf("%w at offset %d", s.err, s.errOff)
	}
	env.Canonical = !s.recode
	return s.check(env)
}

// Value reads one JSON value (not a message) with the same checks as
// Scan: the grammar, UTF-8, escapes, nesting, and duplicate and
// case-variant keys in every object. A layer that rewrites part of a
// message checks its output with it.
func (s *Scanner) Value(v []byte) error {
	s.b, s.pos, s.depth = v, 0, 0
	s.keys, s.arena = s.keys[:0], s.arena[:0]
	s.env = Envelope{}
	s.err, s.errOff, s.idBad, s.version, s.recode = nil, 0, false, false, false
	defer func() { s.b = nil }()
	s.ws()
	err := s.value()
	if err == nil {
		s.ws()
		if s.pos != len(s.b) {
			err = s.syntax("data after the value")
		}
	}
	if err != nil {
		return err
	}
	if s.err != nil {
		return fmt.Errorf("%w at offset %d", s.err, s.errOff)
	}
	return nil
}

// check applies JSON-RPC's rules to a well-formed envelope.
func (s *Scanner) check(env Envelope) (Envelope, error) {
	if !s.version {
		return env, ErrBadVersion
	}
	if env.ID.Present() {
		if !validID(s.b[env.ID.Off:env.ID.End]) {
			env.ID = Span{}
			return env, ErrBadID
		}
		if !exponentOK(s.b[env.ID.Off:env.ID.End]) {
			env.ID = Span{}
			return env, fmt.Errorf("%w: numeric id out of range", ErrBadID)
		}
	}
	if env.Method.Present() {
		m := s.b[env.Method.Off:env.Method.End]
		if m[0] != '"' || len(m) == 2 {
			return env, ErrBadMethod
		}
		env.MethodName = methodName(m)
	}
	if env.Error.Present() && s.b[env.Error.Off] != '{' {
		if s.b[env.Error.Off] == 'n' {
			env.Error = Span{} // "error": null is no error, as encoding/json reads it
		} else {
			return env, ErrBadError
		}
	}
	if s.Strict && (env.Method.Present() && (env.Result.Present() || env.Error.Present()) ||
		env.Result.Present() && env.Error.Present()) {
		return env, ErrMixedKinds
	}
	switch {
	case env.Method.Present() && env.ID.Present():
		env.Kind = KindRequest
	case env.Method.Present():
		env.Kind = KindNotification
	case env.Result.Present() || env.Error.Present():
		env.Kind = KindResponse
	default:
		return env, ErrNoMethodOrResult
	}
	return env, nil
}

func (s *Scanner) syntax(msg string) error {
	return &SyntaxError{Offset: s.pos, msg: msg}
}

// later records an error that does not stop the scan: the scan goes on
// so that the id can still be found for the reply.
func (s *Scanner) later(err error, off int) {
	if s.err == nil {
		s.err, s.errOff = err, off
	}
}

func (s *Scanner) ws() {
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case '\r':
			if s.Strict {
				s.later(ErrLineBreak, s.pos)
			}
			fallthrough
		case ' ', '\t', '\n':
			s.pos++
			s.recode = true
		default:
			return
		}
	}
}

func (s *Scanner) value() error {
	if s.pos >= len(s.b) {
		return s.syntax("unexpected end")
	}
	switch c := s.b[s.pos]; {
	case c == '{':
		return s.object(roleValue)
	case c == '[':
		return s.array()
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.syntax(fmt.Sprintf("unexpected %q", s.b[s.pos]))
}

func (s *Scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.b[s.pos:], []byte(lit)) {
		return s.syntax("invalid literal")
	}
	s.pos += len(lit)
	return nil
}

func (s *Scanner) number() error {
	b, i := s.b, s.pos
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		s.pos = i
		return s.syntax("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			s.pos = i
			return s.syntax("invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			s.pos = i
			return s.syntax("invalid number")
		}
	}
	s.pos = i
	return nil
}

// str reads a string at s.pos (on its opening quote); esc reports whether
// it has escapes.
func (s *Scanner) str() (esc bool, err error) {
	b, i := s.b, s.pos+1
	for i < len(b) {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				s.pos = i + 1
				return esc, nil
			case c == '\\':
				esc = true
				n, err := s.escape(i)
				if err != nil {
					return esc, err
				}
				i += n
			case c < 0x20:
				s.pos = i
				return esc, s.syntax("control character in string")
			default:
				i++
			}
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			s.later(ErrInvalidUTF8, i)
		}
		if escapedRune(r) {
			s.recode = true
		}
		i += size
	}
	s.pos = i
	return esc, s.syntax("unterminated string")
}

// plain marks the bytes a string holds as they are: printable ASCII other
// than the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escape checks the escape at b[i] (a backslash) and returns its length.
func (s *Scanner) escape(i int) (int, error) {
	b := s.b
	if i+1 >= len(b) {
		s.pos = i
		return 0, s.syntax("unterminated string")
	}
	switch b[i+1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case '/':
		s.recode = true
		return 2, nil
	case 'u':
		r, ok := hex4(b, i+2)
		if !ok {
			s.pos = i
			return 0, s.syntax(`invalid \u escape`)
		}
		if !canonicalEscape(b[i+2:i+6], r) {
			s.recode = true
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				if r2, ok := hex4(b, i+8); ok && r2 >= 0xDC00 && r2 < 0xE000 {
					return 12, nil
				}
			}
			s.later(ErrLoneSurrogate, i)
		case r >= 0xDC00 && r < 0xE000:
			s.later(ErrLoneSurrogate, i)
		}
		return 6, nil
	}
	s.pos = i
	return 0, s.syntax("invalid escape")
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (s *Scanner) array() error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++
	s.ws()
	if s.pos < len(s.b) && s.b[s.pos] == ']' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if err := s.value(); err != nil {
			return err
		}
		s.ws()
		if s.pos >= len(s.b) {
			return s.syntax("unterminated array")
		}
		switch s.b[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return nil
		default:
			return s.syntax("expected , or ] in array")
		}
	}
}

func (s *Scanner) enter() error {
	s.depth++
	if s.depth > MaxDepth {
		return fmt.Errorf("%w: over %d levels", ErrTooDeep, MaxDepth)
	}
	return nil
}

// object reads an object at s.pos; r says whether it is the envelope or
// its params, whose members are recorded.
func (s *Scanner) object(r role) error {
	if err := s.enter(); err != nil {
		return err
	}
	base, abase := len(s.keys), len(s.arena)
	start := s.pos
	s.pos++
	s.ws()
	if s.pos < len(s.b) && s.b[s.pos] == '}' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if s.pos >= len(s.b) || s.b[s.pos] != '"' {
			return s.syntax("expected a key")
		}
		kstart := s.pos
		esc, err := s.str()
		if err != nil {
			return err
		}
		ref := keyRef{off: uint32(kstart + 1), n: uint32(s.pos - 1 - (kstart + 1))}
		if esc {
			off := len(s.arena)
			s.arena = unescape(s.arena, s.b[kstart+1:s.pos-1])
			ref = keyRef{off: uint32(off), n: uint32(len(s.arena)-off) | arenaBit}
		}
		key := s.key(ref)
		m := mNone
		if r != roleValue {
			m = s.known(r, key, kstart)
		}
		s.addKey(base, ref, key, kstart, m)
		s.ws()
		if s.pos >= len(s.b) || s.b[s.pos] != ':' {
			return s.syntax("expected :")
		}
		s.pos++
		s.ws()
		vstart := s.pos
		if m == mParams && s.pos < len(s.b) && s.b[s.pos] == '{' {
			err = s.object(roleParams)
		} else {
			err = s.value()
		}
		if err != nil {
			return err
		}
		s.record(m, Span{vstart, s.pos})
		s.ws()
		if s.pos >= len(s.b) {
			return s.syntax("unterminated object")
		}
		switch s.b[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			if len(s.keys)-base > smallObject {
				s.wideKeys(base, r, start)
			}
			s.keys, s.arena = s.keys[:base], s.arena[:abase]
			return nil
		default:
			return s.syntax("expected , or } in object")
		}
	}
}

func (s *Scanner) key(r keyRef) []byte {
	n := r.n &^ arenaBit
	if r.n&arenaBit != 0 {
		return s.arena[r.off : r.off+n]
	}
	return s.b[r.off : r.off+n]
}

// known returns which member the guard reads key names, and refuses a key
// that differs from one only in case.
func (s *Scanner) known(r role, key []byte, off int) member {
	list := envelopeMembers
	if r == roleParams {
		list = paramsMembers
	}
	for _, k := range list {
		if string(key) == k.name {
			return k.m
		}
	}
	for _, k := range list {
		if bytes.EqualFold(key, []byte(k.name)) {
			s.later(fmt.Errorf("%w: %q is read as %q by some servers", ErrCaseKey, key, k.name), off)
		}
	}
	return mNone
}

func (s *Scanner) record(m member, v Span) {
	switch m {
	case mJSONRPC:
		s.version = unescapedIs(s.b[v.Off:v.End], Version)
	case mID:
		s.env.ID = v
	case mMethod:
		s.env.Method = v
	case mParams:
		s.env.Params = v
	case mResult:
		s.env.Result = v
	case mError:
		s.env.Error = v
	case mName:
		s.env.Name = v
	case mArguments:
		s.env.Arguments = v
	case mURI:
		s.env.URI = v
	}
}

// smallObject is the number of keys up to which duplicates are found by
// comparing each key with the ones before it, as it is read; a larger
// object's keys are sorted by their case-folded form when it closes, and
// neighbours compared (wideKeys): no map, no copy of the keys.
const smallObject = 16

// addKey records a key of the object whose keys start at base, refusing a
// duplicate or a key that differs from an earlier one only in case while
// the object is small.
func (s *Scanner) addKey(base int, ref keyRef, key []byte, off int, m member) {
	if prev := s.keys[base:]; len(prev) < smallObject {
		for _, p := range prev {
			pk := s.key(p)
			if bytes.Equal(pk, key) {
				s.dupKey(key, off, m)
			} else if bytes.EqualFold(pk, key) {
				s.later(fmt.Errorf("%w: %q and %q", ErrCaseKey, pk, key), off)
			}
		}
	}
	s.keys = append(s.keys, ref)
}

// wideKeys finds duplicate and case-variant keys of a wide object (the
// keys from base on) that closed at s.pos, having opened at start.
func (s *Scanner) wideKeys(base int, r role, start int) {
	keys := s.keys[base:]
	slices.SortFunc(keys, func(a, b keyRef) int { return compareFolded(s.key(a), s.key(b)) })
	for i := 1; i < len(keys); i++ {
		a, b := s.key(keys[i-1]), s.key(keys[i])
		if compareFolded(a, b) != 0 {
			continue
		}
		if bytes.Equal(a, b) {
			if r == roleEnvelope && string(a) == "id" {
				s.idBad = true
			}
			s.later(fmt.Errorf("%w %q", ErrDuplicateKey, a), start)
		} else {
			s.later(fmt.Errorf("%w: %q and %q", ErrCaseKey, a, b), start)
		}
		return
	}
}

// compareFolded orders keys by FoldKey's form, without making it.
func compareFolded(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := foldedRune(a)
		rb, nb := foldedRune(b)
		if ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// foldedRune is the first rune of k as FoldKey writes it, and its size.
func foldedRune(k []byte) (rune, int) {
	c := k[0]
	if c < utf8.RuneSelf {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		return rune(c), 1
	}
	r, n := utf8.DecodeRune(k)
	f := r
	for x := unicode.SimpleFold(r); x != r; x = unicode.SimpleFold(x) {
		if x < f {
			f = x
		}
	}
	if f >= 'A' && f <= 'Z' {
		f += 'a' - 'A'
	}
	return f, n
}

func (s *Scanner) dupKey(key []byte, off int, m member) {
	if m == mID {
		s.idBad = true
	}
	s.later(fmt.Errorf("%w %q", ErrDuplicateKey, key), off)
}

// FoldKey maps a key to one representative of the keys bytes.EqualFold
// (and so encoding/json) treats as equal to it: each rune is replaced by
// the smallest rune of its case-folding orbit.
func FoldKey(k []byte) string {
	out := make([]byte, 0, len(k))
	for len(k) > 0 {
		c := k[0]
		if c < utf8.RuneSelf {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			out = append(out, c)
			k = k[1:]
			continue
		}
		r, n := utf8.DecodeRune(k)
		k = k[n:]
		f := r
		for x := unicode.SimpleFold(r); x != r; x = unicode.SimpleFold(x) {
			if x < f {
				f = x
			}
		}
		if f >= 'A' && f <= 'Z' { // K (Kelvin) folds to k, ſ to s: as ASCII does
			f += 'a' - 'A'
		}
		out = utf8.AppendRune(out, f)
	}
	return string(out)
}

// unescape appends the value of the JSON string body raw (without its
// quotes, already checked by the scanner) to dst. Lone surrogates become
// U+FFFD; the scanner refuses messages with them anyway.
func unescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := bytes.IndexByte(raw[i:], '\\')
			if j < 0 {
				return append(dst, raw[i:]...)
			}
			dst = append(dst, raw[i:i+j]...)
			i += j
			continue
		}
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw, i+2)
			i += 6
			if r >= 0xD800 && r < 0xDC00 && i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
				if r2, ok := hex4(raw, i+2); ok && r2 >= 0xDC00 && r2 < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					i += 6
				}
			}
			if r >= 0xD800 && r < 0xE000 {
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // " \ /
			dst = append(dst, raw[i+1])
		}
		i += 2
	}
	return dst
}

// unescapedIs reports whether the JSON string quoted equals want.
func unescapedIs(quoted []byte, want string) bool {
	if len(quoted) < 2 || quoted[0] != '"' {
		return false
	}
	var buf [32]byte
	return string(unescape(buf[:0], quoted[1:len(quoted)-1])) == want
}

// Unquote returns the value of a JSON string (quotes included, as a Span
// gives it) that the scanner accepted.
func Unquote(quoted []byte) string {
	if len(quoted) < 2 || quoted[0] != '"' {
		return ""
	}
	body := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body)
	}
	return string(unescape(nil, body))
}

// commonMethods are returned without an allocation.
var commonMethods = []string{
	"tools/call", "tools/list", "resources/read", "resources/list", "resources/templates/list",
	"resources/subscribe", "resources/unsubscribe", "prompts/get", "prompts/list",
	"completion/complete", "initialize", "ping", "logging/setLevel",
	"notifications/initialized", "notifications/cancelled", "notifications/progress",
	"notifications/message", "notifications/tools/list_changed", "notifications/resources/list_changed",
	"notifications/prompts/list_changed", "notifications/resources/updated", "notifications/roots/list_changed",
	"sampling/createMessage", "elicitation/create", "roots/list",
}

func methodName(quoted []byte) string {
	body := quoted[1 : len(quoted)-1]
	for _, m := range commonMethods {
		if string(body) == m {
			return m
		}
	}
	return Unquote(quoted)
}

// AppendIDKey appends the canonical form of a JSON-RPC id to dst: ids that
// every parser reads as the same value get the same key, so that a server
// that re-encodes an id (1 as 1.0, "Ab" as "\u0041b") still has its answer
// routed. Strings compare after unescaping; numbers as exact decimals (1,
// 1.0, 10e-1 and 1e0 are one id; 1e400 is not infinity); null is null. It
// reports false for what is not an id, and for a number whose exponent is
// beyond any real id (more than 9 digits).
func AppendIDKey(dst, id []byte) ([]byte, bool) {
	if len(id) == 0 {
		return dst, false
	}
	switch c := id[0]; {
	case c == '"':
		if len(id) < 2 {
			return dst, false
		}
		dst = append(dst, 's')
		return unescape(dst, id[1:len(id)-1]), true
	case c == 'n':
		return append(dst, "null"...), string(id) == "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return appendNumberKey(dst, id)
	}
	return dst, false
}

// exponentOK reports whether a number's exponent, if any, has at most 9
// significant digits (see AppendIDKey).
func exponentOK(num []byte) bool {
	if num[0] != '-' && (num[0] < '0' || num[0] > '9') {
		return true // not a number
	}
	i := bytes.IndexAny(num, "eE")
	if i < 0 {
		return true
	}
	exp := bytes.TrimLeft(num[i+1:], "+-")
	return len(bytes.TrimLeft(exp, "0")) <= 9
}

// appendNumberKey writes a number as n[-]DIGITSeEXP, DIGITS without
// leading or trailing zeros, or n0 for zero.
func appendNumberKey(dst, num []byte) ([]byte, bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	mant, exp, hasExp := num, []byte(nil), false
	if i := bytes.IndexAny(num, "eE"); i >= 0 {
		mant, exp, hasExp = num[:i], num[i+1:], true
	}
	var e int64
	if hasExp {
		eneg := false
		if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
			eneg = exp[0] == '-'
			exp = exp[1:]
		}
		exp = bytes.TrimLeft(exp, "0")
		if len(exp) > 9 {
			return dst, false
		}
		if len(exp) > 0 {
			v, err := strconv.ParseInt(string(exp), 10, 64)
			if err != nil {
				return dst, false
			}
			e = v
		}
		if eneg {
			e = -e
		}
	}
	intPart, frac := mant, []byte(nil)
	if i := bytes.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	e -= int64(len(frac))
	// digits = intPart+frac without leading zeros; trailing zeros go to e.
	start := len(dst)
	dst = append(dst, 'n')
	if neg {
		dst = append(dst, '-')
	}
	digits := len(dst)
	for _, part := range [][]byte{intPart, frac} {
		for _, c := range part {
			if c == '0' && len(dst) == digits {
				continue
			}
			dst = append(dst, c)
		}
	}
	if len(dst) == digits {
		return append(dst[:start], "n0"...), true
	}
	for dst[len(dst)-1] == '0' {
		dst = dst[:len(dst)-1]
		e++
	}
	dst = append(dst, 'e')
	return strconv.AppendInt(dst, e, 10), true
}
