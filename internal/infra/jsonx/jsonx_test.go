package jsonx

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
)

type inner struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason" null:"zero"`
}

type outer struct {
	Name string `json:"name"`
	inner
	Since  time.Time  `json:"since" null:"zero"`
	At     time.Time  `json:"at"`
	Count  int        `json:"count"`
	Maybe  *int       `json:"maybe"`
	List   []string   `json:"list"`
	Nested *outerLeaf `json:"nested"`
	Hidden string     `json:"-"`
	lower  string
}

type outerLeaf struct {
	Why string `json:"why" null:"zero"`
}

func (o outer) MarshalJSON() ([]byte, error)     { return Marshal(o) }
func (o outerLeaf) MarshalJSON() ([]byte, error) { return Marshal(o) }

// TestMarshal: every field present, in order, embedded fields in place;
// tagged zero values null, untagged ones as they are.
func TestMarshal(t *testing.T) {
	got, err := json.Marshal(outer{Name: "n", Hidden: "h", lower: "l"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"n","ready":false,"reason":null,"since":null,"at":"0001-01-01T00:00:00Z","count":0,"maybe":null,"list":null,"nested":null}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	got, err = json.Marshal(outer{Name: "n", inner: inner{true, "r <b>"}, Since: at, Nested: &outerLeaf{Why: "w"}})
	if err != nil {
		t.Fatal(err)
	}
	want = `{"name":"n","ready":true,"reason":"r \u003cb\u003e","since":"2026-11-24T10:00:00Z","at":"0001-01-01T00:00:00Z","count":0,"maybe":null,"list":null,"nested":{"why":"w"}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Decoding takes a null back as the zero value.
	var back outer
	if err := json.Unmarshal([]byte(`{"name":"n","reason":null,"since":null}`), &back); err != nil || back.Reason != "" || !back.Since.IsZero() {
		t.Fatalf("decoded %+v: %v", back, err)
	}
}

// TestMarshalRefusesOmitempty: a field that could vanish is a mistake.
func TestMarshalRefusesOmitempty(t *testing.T) {
	type bad struct {
		X string `json:"x,omitempty"`
	}
	if _, err := Marshal(bad{}); err == nil {
		t.Fatal("omitempty accepted")
	}
}

func TestMissing(t *testing.T) {
	typ := reflect.TypeFor[[]outer]()
	got, err := Missing(typ, []byte(`[{"name":"a","ready":true,"since":null,"at":"x","count":1,"maybe":null,"list":[],"nested":{}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"[0].reason", "[0].nested.why"}; !slices.Equal(got, want) {
		t.Fatalf("missing %v, want %v", got, want)
	}
}
