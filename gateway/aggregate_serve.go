package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// initialize initializes every server with the client's parameters and
// answers as one server with what they offer together.
func (a *aggregate) initialize(id json.RawMessage, line []byte) {
	var req struct {
		Params json.RawMessage `json:"params"`
	}
	json.Unmarshal(line, &req)
	type answer struct {
		result initResult
		err    error
	}
	answers := make([]answer, len(a.names))
	var wg sync.WaitGroup
	for i, name := range a.names {
		wg.Go(func() {
			res, err := a.ask(a.backends[name], "initialize", req.Params)
			if err == nil {
				err = json.Unmarshal(res, &answers[i].result)
			}
			answers[i].err = err
		})
	}
	wg.Wait()
	var ok []initResult
	var errs []string
	for i, ans := range answers {
		if ans.err != nil {
			// That server stays out of the session; the others serve.
			a.s.g.logf("session %s: %v", a.s, ans.err)
			errs = append(errs, ans.err.Error())
			a.backends[a.names[i]].close()
			continue
		}
		ans.result.server = a.names[i]
		ok = append(ok, ans.result)
		a.mu.Lock()
		a.caps[a.names[i]] = ans.result.Capabilities
		a.mu.Unlock()
	}
	if len(ok) == 0 {
		a.fail(id, jsonrpc.CodeInternalError, "no server initialized: %s", strings.Join(errs, "; "))
		return
	}
	var asked struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	json.Unmarshal(req.Params, &asked)
	a.reply(id, mergeInit(ok, asked.ProtocolVersion), nil)
}

// initResult is what the aggregate reads of a server's initialize result.
type initResult struct {
	ProtocolVersion string                     `json:"protocolVersion"`
	Capabilities    map[string]json.RawMessage `json:"capabilities"`
	Instructions    string                     `json:"instructions"`
	server          string
}

// mergeInit is the aggregate's initialize result: the capabilities any
// server has (lists change as the servers' do), the servers' instructions
// under their names, and the version every server agreed on (when they
// differ: the one the client asked for if a server took it, else the
// first server's).
func mergeInit(rs []initResult, asked string) map[string]any {
	has := func(c string) bool {
		return slices.ContainsFunc(rs, func(r initResult) bool { return r.Capabilities[c] != nil })
	}
	caps := map[string]any{}
	if has("tools") {
		caps["tools"] = map[string]any{"listChanged": true}
	}
	if has("prompts") {
		caps["prompts"] = map[string]any{"listChanged": true}
	}
	if has("resources") {
		subscribe := slices.ContainsFunc(rs, func(r initResult) bool {
			var c struct {
				Subscribe bool `json:"subscribe"`
			}
			json.Unmarshal(r.Capabilities["resources"], &c)
			return c.Subscribe
		})
		caps["resources"] = map[string]any{"listChanged": true, "subscribe": subscribe}
	}
	for _, c := range []string{"completions", "logging"} {
		if has(c) {
			caps[c] = map[string]any{}
		}
	}
	version := rs[0].ProtocolVersion
	if !slices.ContainsFunc(rs, func(r initResult) bool { return r.ProtocolVersion != version }) {
		// all agree
	} else if slices.ContainsFunc(rs, func(r initResult) bool { return r.ProtocolVersion == asked }) {
		version = asked
	}
	var instr []string
	for _, r := range rs {
		if r.Instructions != "" {
			instr = append(instr, fmt.Sprintf("Server %s: %s", r.server, r.Instructions))
		}
	}
	out := map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
		"serverInfo":      map[string]any{"name": "mcpguard-gateway", "version": "1"},
	}
	if len(instr) > 0 {
		out["instructions"] = strings.Join(instr, "\n\n")
	}
	return out
}

// offers reports whether server name declared capability c at initialize
// (a server not initialized yet is asked anyway).
func (a *aggregate) offers(name, c string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	caps, ok := a.caps[name]
	return !ok || caps[c] != nil
}

// stale drops k's merged list after a server said it changed.
func (a *aggregate) stale(k *kind) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.views, k)
	a.gen[k]++
}

// view returns k's merged list, building it when there is none: every
// live server that offers it is asked for all its pages.
func (a *aggregate) view(k *kind) *view {
	a.mu.Lock()
	v, gen := a.views[k], a.gen[k]
	a.mu.Unlock()
	if v != nil {
		return v
	}
	build := a.building[k]
	build.Lock()
	defer build.Unlock()
	a.mu.Lock()
	v, gen = a.views[k], a.gen[k]
	a.mu.Unlock()
	if v != nil {
		return v
	}
	live := a.live()
	lists := make([][]listed, len(live))
	var failed atomic.Bool
	var wg sync.WaitGroup
	for i, b := range live {
		if !a.offers(b.name, k.cap) {
			continue
		}
		wg.Go(func() {
			items, err := a.serverList(b, k)
			if err != nil {
				a.s.g.logf("session %s: %v", a.s, err)
				failed.Store(true)
			}
			lists[i] = items
		})
	}
	wg.Wait()
	var all []listed
	for _, l := range lists {
		all = append(all, l...)
	}
	v = k.merge(all)
	for _, r := range v.refused {
		a.s.g.logf("session %s: %s left out of %s: its name collides after prefixing", a.s, r, k.method)
	}
	// A view without a server whose list failed is used once, not kept:
	// the next request that needs it lists again, so that a server slow
	// to answer once is not out of the session for good.
	a.mu.Lock()
	if a.gen[k] == gen && !failed.Load() {
		a.views[k] = v
	}
	a.mu.Unlock()
	return v
}

// serverList reads every page of b's list of k.
func (a *aggregate) serverList(b *backend, k *kind) ([]listed, error) {
	var out []listed
	cursor := ""
	for range maxPages {
		params := json.RawMessage("{}")
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := a.ask(b, k.method, params)
		if err != nil {
			return out, err
		}
		var page map[string]json.RawMessage
		var items []json.RawMessage
		if err := json.Unmarshal(res, &page); err != nil {
			return out, fmt.Errorf("%s %s: %w", b.name, k.method, err)
		}
		if err := json.Unmarshal(page[k.field], &items); err != nil && page[k.field] != nil {
			return out, fmt.Errorf("%s %s: %w", b.name, k.method, err)
		}
		for _, raw := range items {
			if name, ok := itemName(raw, k.key); ok {
				out = append(out, listed{server: b.name, name: name, raw: raw})
			}
		}
		cursor = ""
		json.Unmarshal(page["nextCursor"], &cursor)
		if cursor == "" {
			return out, nil
		}
	}
	return out, fmt.Errorf("%s %s: over %d pages", b.name, k.method, maxPages)
}

// list answers a list request with the merged list, in one page.
func (a *aggregate) list(id json.RawMessage, line []byte, k *kind) {
	var req struct {
		Params struct {
			Cursor *string `json:"cursor"`
		} `json:"params"`
	}
	json.Unmarshal(line, &req)
	if req.Params.Cursor != nil {
		a.fail(id, jsonrpc.CodeInvalidParams, "invalid cursor: the aggregate endpoint lists everything in one page")
		return
	}
	go func() {
		items := a.view(k).items
		if items == nil {
			items = []json.RawMessage{}
		}
		a.reply(id, map[string]any{k.field: items}, nil)
	}()
}

// byName routes a request that names an item of k in params.<field> (a
// tool call, a prompt) to the server that listed the name, with the
// server's own name.
func (a *aggregate) byName(id json.RawMessage, line []byte, k *kind, field string) {
	var req struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	var name string
	if json.Unmarshal(line, &req) != nil || json.Unmarshal(req.Params[field], &name) != nil {
		a.fail(id, jsonrpc.CodeInvalidParams, "%s needs params.%s", k.method, field)
		return
	}
	a.routed(func() {
		tg, ok := a.view(k).route[name]
		if !ok {
			a.fail(id, jsonrpc.CodeInvalidParams, "unknown %s %q (%s lists the names)", strings.TrimSuffix(k.field, "s"), name, k.method)
			return
		}
		a.forward(id, line, field, name, tg)
	}, k)
}

// routed runs route at once when the lists it reads (ks) are built, else
// on a goroutine of its own, since building them asks every server.
func (a *aggregate) routed(route func(), ks ...*kind) {
	a.mu.Lock()
	ready := true
	for _, k := range ks {
		ready = ready && a.views[k] != nil
	}
	a.mu.Unlock()
	if ready {
		route()
		return
	}
	go route()
}

// forward sends line to tg's server, with params.field rewritten to the
// server's name when the client's differs.
func (a *aggregate) forward(id json.RawMessage, line []byte, field, shown string, tg target) {
	b := a.backends[tg.server]
	out := line
	if tg.name != shown {
		v, _ := json.Marshal(tg.name)
		var err error
		if out, err = withParam(line, field, v); err != nil {
			a.fail(id, jsonrpc.CodeInvalidParams, "%v", err)
			return
		}
	}
	a.send(b, id, out)
}

// byURI routes a resource request (read, subscribe, unsubscribe) by its
// params.uri.
func (a *aggregate) byURI(id json.RawMessage, line []byte) {
	var req struct {
		Params struct {
			URI *string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &req) != nil || req.Params.URI == nil {
		a.fail(id, jsonrpc.CodeInvalidParams, "needs params.uri")
		return
	}
	uri := *req.Params.URI
	a.routed(func() {
		tg, err := resolveURI(a.view(kindResources), a.view(kindTemplates), uri)
		if err != nil {
			a.fail(id, jsonrpc.CodeInvalidParams, "%v", err)
			return
		}
		a.forward(id, line, "uri", uri, tg)
	}, kindResources, kindTemplates)
}

// complete routes completion/complete by its reference: a prompt's name,
// or a resource template (or resource) URI.
func (a *aggregate) complete(id json.RawMessage, line []byte) {
	var req struct {
		Params struct {
			Ref map[string]json.RawMessage `json:"ref"`
		} `json:"params"`
	}
	var typ string
	if json.Unmarshal(line, &req) != nil || json.Unmarshal(req.Params.Ref["type"], &typ) != nil {
		a.fail(id, jsonrpc.CodeInvalidParams, "completion/complete needs params.ref")
		return
	}
	field, k := "name", kindPrompts
	if typ == "ref/resource" {
		field, k = "uri", kindTemplates
	} else if typ != "ref/prompt" {
		a.fail(id, jsonrpc.CodeInvalidParams, "unknown reference type %q", typ)
		return
	}
	var name string
	if json.Unmarshal(req.Params.Ref[field], &name) != nil {
		a.fail(id, jsonrpc.CodeInvalidParams, "params.ref needs %s", field)
		return
	}
	a.routed(func() {
		tg, ok := a.view(k).route[name]
		if !ok && k == kindTemplates {
			tg, ok = a.view(kindResources).route[name]
		}
		if !ok {
			a.fail(id, jsonrpc.CodeInvalidParams, "unknown reference %q", name)
			return
		}
		out := line
		if tg.name != name {
			v, _ := json.Marshal(tg.name)
			ref, err := withRaw(mustJSON(req.Params.Ref), field, v)
			if err == nil {
				out, err = withParam(line, "ref", ref)
			}
			if err != nil {
				a.fail(id, jsonrpc.CodeInvalidParams, "%v", err)
				return
			}
		}
		a.send(a.backends[tg.server], id, out)
	}, k, kindResources)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// setLevel sets every logging server's level and answers when they did.
func (a *aggregate) setLevel(id json.RawMessage, line []byte) {
	var req struct {
		Params json.RawMessage `json:"params"`
	}
	json.Unmarshal(line, &req)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for _, b := range a.live() {
		if !a.offers(b.name, "logging") {
			continue
		}
		wg.Go(func() {
			if _, err := a.ask(b, "logging/setLevel", req.Params); err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		a.fail(id, jsonrpc.CodeInternalError, "%s", strings.Join(errs, "; "))
		return
	}
	a.reply(id, struct{}{}, nil)
}
