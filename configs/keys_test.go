package configs

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/recovery"
)

// docFixture: a document with every required key and nothing else, one
// claimable workflow of one task without policies (both get every
// policy default). Paths are the reference's ("workflows[].tasks[].x").
func docFixture() map[string]any {
	return map[string]any{
		"database": map[string]any{"dsn_env": "ENGINEHEALTH_DSN"},
		"etcd":     map[string]any{"endpoints": []any{"127.0.0.1:2379"}},
		"workflows": []any{map[string]any{
			"name": "w", "table": "app.orders", "id_column": "id", "status_column": "status", "error_column": "last_error",
			"claimable": true, "claims": map[string]any{"table": "app.orders_claim"},
			"tasks": []any{map[string]any{"name": "t", "begin": "A", "interim": "B", "end": "C", "failed": "D"}},
		}},
	}
}

// set writes v at the reference path path of doc ("a[].b": key b of the
// first entry of list a), making the mappings on the way.
func set(t *testing.T, doc map[string]any, path string, v any) {
	t.Helper()
	parts := strings.Split(path, ".")
	m := doc
	for i, p := range parts {
		name, list := strings.CutSuffix(p, "[]")
		if i == len(parts)-1 {
			m[name] = v
			return
		}
		switch {
		case list:
			l, ok := m[name].([]any)
			if !ok || len(l) == 0 {
				t.Fatalf("set %s: no list %s", path, name)
			}
			m = l[0].(map[string]any)
		default:
			next, ok := m[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[name] = next
			}
			m = next
		}
	}
}

// written reports whether doc gives the key at the reference path path.
func written(doc map[string]any, path string) bool {
	var v any = doc
	for _, p := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(p, "[]")
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[name]; !ok {
			return false
		}
		if list {
			l, _ := v.([]any)
			if len(l) == 0 {
				return false
			}
			v = l[0]
		}
	}
	return true
}

// parseDoc loads doc (as JSON, which is YAML): the configuration, or
// the problems.
func parseDoc(t *testing.T, doc map[string]any) (*Config, []Problem) {
	t.Helper()
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data, "/etc/enginehealth/enginehealth.yaml", testEnv)
	var cerr *Error
	if err != nil && !errors.As(err, &cerr) {
		t.Fatal(err)
	}
	if cerr != nil {
		return nil, cerr.Problems
	}
	return cfg, nil
}

func problemsAt(problems []Problem, path string) []Problem {
	var out []Problem
	for _, p := range problems {
		if p.Path == path {
			out = append(out, p)
		}
	}
	return out
}

// concrete is a reference path with every list at its first entry.
func concrete(path string) string { return strings.ReplaceAll(path, "[]", "[0]") }

// valueAt returns the value at a concrete key path of cfg, pointers
// followed; false when a mapping on the way is absent.
func valueAt(cfg *Config, path string) (reflect.Value, bool) {
	v := reflect.ValueOf(cfg).Elem()
	for _, p := range strings.Split(path, ".") {
		name, index, list := strings.Cut(p, "[")
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return v, false
			}
			v = v.Elem()
		}
		found := false
		for i := range v.NumField() {
			if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); tag == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return v, false
		}
		if list {
			n, _ := strconv.Atoi(strings.TrimSuffix(index, "]"))
			if v.Len() <= n {
				return v, false
			}
			v = v.Index(n)
		}
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	return v, true
}

func reference(t *testing.T) []Key {
	t.Helper()
	keys, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestEveryKeyIsDocumented: every field of the model with a yaml name has
// an entry in Keys and every entry a field; a default, a bound and an
// enumeration's values have the Go type of the key's value.
func TestEveryKeyIsDocumented(t *testing.T) {
	keys := reference(t)
	if len(keys) < 80 {
		t.Fatalf("the walk found %d keys: too few for the model", len(keys))
	}
	for _, k := range keys {
		if k.Doc == "" {
			t.Errorf("%s: no Doc in Keys[%q]", k.Path, k.ID)
		}
		elem := k.Type
		if elem.Kind() == reflect.Slice {
			elem = elem.Elem()
		}
		for what, v := range map[string]any{"Default": k.Default, "Min": k.Min, "Max": k.Max} {
			if v != nil && reflect.TypeOf(v) != elem {
				t.Errorf("%s: %s is a %T, the key holds %s", k.Path, what, v, elem)
			}
		}
		if len(k.Values) > 0 && elem.Kind() != reflect.String {
			t.Errorf("%s: Values for a %s", k.Path, elem)
		}
	}
}

// TestDocumentedDefaults: every documented default is the value Load
// applies when the key is absent.
func TestDocumentedDefaults(t *testing.T) {
	cfg, problems := parseDoc(t, docFixture())
	if problems != nil {
		t.Fatalf("the fixture does not load: %v", problems)
	}
	n := 0
	for _, k := range reference(t) {
		if k.Default == nil || written(docFixture(), k.Path) {
			continue
		}
		n++
		v, ok := valueAt(cfg, concrete(k.Path))
		if !ok {
			t.Errorf("%s: absent from the loaded fixture", k.Path)
			continue
		}
		if got := v.Interface(); !reflect.DeepEqual(got, k.Default) {
			t.Errorf("%s: documented default %v (%T), Load applied %v (%T)", k.Path, k.Default, k.Default, got, got)
		}
	}
	if n < 30 {
		t.Fatalf("only %d defaults checked", n)
	}
}

// rangeFixtures: keys set beside the one under test (relative to its
// mapping), so that a value at its bound meets the other keys' rules.
var rangeFixtures = map[string]map[string]any{
	"Health.sweep_interval": {"schedule": "@every 1s"},
	"Backoff.max_delay":     {"base": "0s"},
	"Backoff.schedule":      {"kind": recovery.BackoffSchedule, "max_delay": maxBackoffDelay.String()},
	"APITLS.client_auth":    {"client_ca_file": "ca.pem"},
}

// yamlValue writes a value of a key's type for the fixture (as JSON).
func yamlValue(v any, list bool) any {
	var out any
	switch x := v.(type) {
	case time.Duration:
		out = x.String()
	case float64:
		out = json.RawMessage(strconv.FormatFloat(x, 'f', -1, 64))
	default:
		out = x
	}
	if list {
		return []any{out}
	}
	return out
}

// step returns v moved just outside (dir -1 below, +1 above) a closed
// bound: one unit of its type, 1e-9 of a number.
func step(v any, dir int) any {
	switch x := v.(type) {
	case time.Duration:
		return x + time.Duration(dir)
	case int:
		return x + dir
	case float64:
		return x + float64(dir)*1e-9
	}
	panic(fmt.Sprintf("no step for %T", v))
}

// TestDocumentedRanges: for each documented bound, the value just outside
// it is refused with a problem at the key (the bound itself, when open),
// and a closed bound itself raises no problem at the key.
func TestDocumentedRanges(t *testing.T) {
	n := 0
	for _, k := range reference(t) {
		list := k.Type.Kind() == reflect.Slice
		at := concrete(k.Path)
		if list {
			at += "[0]"
		}
		try := func(v any) []Problem {
			doc := docFixture()
			parent := k.Path[:max(strings.LastIndex(k.Path, "."), 0)]
			for fk, fv := range rangeFixtures[k.ID] {
				set(t, doc, strings.TrimPrefix(parent+"."+fk, "."), fv)
			}
			set(t, doc, k.Path, yamlValue(v, list))
			_, problems := parseDoc(t, doc)
			return problemsAt(problems, at)
		}
		for _, b := range []struct {
			bound any
			open  bool
			dir   int
		}{{k.Min, k.MinOpen, -1}, {k.Max, k.MaxOpen, +1}} {
			if b.bound == nil {
				continue
			}
			n++
			outside := b.bound
			if !b.open {
				outside = step(b.bound, b.dir)
				if p := try(b.bound); len(p) > 0 {
					t.Errorf("%s: %v is within the documented range, refused: %v", k.Path, b.bound, p)
				}
			}
			if p := try(outside); len(p) == 0 {
				t.Errorf("%s: %v is outside the documented range, but Load raises no problem at %s", k.Path, outside, at)
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d bounds checked", n)
	}
}

// TestDocumentedValues: an enumeration accepts each documented value and
// refuses any other, at its key.
func TestDocumentedValues(t *testing.T) {
	n := 0
	for _, k := range reference(t) {
		if len(k.Values) == 0 {
			continue
		}
		at := concrete(k.Path)
		for _, v := range append(slices.Clone(k.Values), "bogus") {
			doc := docFixture()
			parent := k.Path[:strings.LastIndex(k.Path, ".")]
			for fk, fv := range rangeFixtures[k.ID] {
				set(t, doc, parent+"."+fk, fv)
			}
			set(t, doc, k.Path, v)
			_, problems := parseDoc(t, doc)
			p := problemsAt(problems, at)
			switch {
			case v == "bogus" && len(p) == 0:
				t.Errorf("%s: %q is no documented value, yet no problem at %s", k.Path, v, at)
			case v != "bogus" && len(p) > 0:
				t.Errorf("%s: documented value %q refused: %v", k.Path, v, p)
			}
			n++
		}
	}
	if n < 20 {
		t.Fatalf("only %d values checked", n)
	}
}

// TestReloadable: Reloadable holds each of ReloadableKeys, a key under a
// prefix among them, and no other key.
func TestReloadable(t *testing.T) {
	for _, k := range ReloadableKeys() {
		if !Reloadable(k) {
			t.Errorf("Reloadable(%q) = false", k)
		}
	}
	paths := map[string]bool{}
	for _, k := range reference(t) {
		paths[k.Path] = true
	}
	for _, k := range ReloadableKeys() {
		if !paths[k] {
			t.Errorf("reloadable key %q is no key of the model", k)
		}
	}
	for _, k := range []string{"api.listen", "api.tls", "api.tls.client_auth", "etcd.tls.server_name", "log.format", "database.dsn_file"} {
		if Reloadable(k) {
			t.Errorf("Reloadable(%q) = true", k)
		}
	}
}
