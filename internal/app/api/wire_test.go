package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
	"github.com/enginehealth/enginehealth/recovery"
)

// answerTypes are the bodies of every answer of the API (and so of the
// CLI's -o json, which prints them).
var answerTypes = []reflect.Type{
	reflect.TypeFor[apitype.Health](),           // /healthz
	reflect.TypeFor[apitype.Ready](),            // /readyz
	reflect.TypeFor[apitype.Leader](),           // /v1/leader
	reflect.TypeFor[apitype.Status](),           // /v1/status
	reflect.TypeFor[apitype.ErrorBody](),        // every error
	reflect.TypeFor[apitype.CheckResult](),      // POST /v1/check
	reflect.TypeFor[apitype.Pause](),            // pause, resume
	reflect.TypeFor[apitype.RecoveryAnswer](),   // POST /v1/recovery
	reflect.TypeFor[[]apitype.Node](),           // /v1/nodes, ack
	reflect.TypeFor[apitype.GradeChange](),      // reset-grade
	reflect.TypeFor[[]apitype.Run](),            // /v1/runs
	reflect.TypeFor[apitype.RunDetail](),        // /v1/runs/{id}
	reflect.TypeFor[[]apitype.Event](),          // /v1/events
	reflect.TypeFor[[]apitype.Hold](),           // /v1/holds
	reflect.TypeFor[apitype.HoldResult](),       // holds retry, fail
	reflect.TypeFor[apitype.RetryResult](),      // POST /v1/retry
	reflect.TypeFor[apitype.InstanceView](),     // /v1/instances
	reflect.TypeFor[[]apitype.RetryStats](),     // /v1/retries/stats
	reflect.TypeFor[[]apitype.WorkflowPlan](),   // a dry run's plan
	reflect.TypeFor[[]apitype.SettleCounts](),   // in a check's answer
	reflect.TypeFor[apitype.WaitingRetry](),     // the status page (JSON-ready)
	reflect.TypeFor[map[string]apitype.Pause](), // (maps are walked too)
	reflect.TypeFor[*apitype.InstanceView](),    // (pointers too)
	reflect.TypeFor[[2]apitype.PlannedEffect](), // (arrays too)
}

// TestEveryAnswerFieldIsSent pins the API's rule (jsonx): every field of
// every answer is present, null when it has no value. No field of an
// answer type carries omitempty or omitzero; the zero value of each type
// sends every field; a field tagged null:"zero" is null when zero, so its
// type has a MarshalJSON (jsonx.Marshal) that honours the tag, and so
// does a type that embeds one with a MarshalJSON of its own (which would
// otherwise be promoted and send the embedded fields alone).
func TestEveryAnswerFieldIsSent(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var structs []reflect.Type
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(typ.Elem())
		case reflect.Struct:
			if seen[typ] || typ == reflect.TypeFor[time.Time]() {
				return
			}
			seen[typ] = true
			structs = append(structs, typ)
			for i := range typ.NumField() {
				walk(typ.Field(i).Type)
			}
		}
	}
	for _, typ := range answerTypes {
		walk(typ)
	}
	if len(structs) < 25 {
		t.Fatalf("only %d answer struct types found", len(structs))
	}
	for _, typ := range structs {
		var nullable []string
		var fields func(reflect.Type)
		fields = func(st reflect.Type) {
			for i := range st.NumField() {
				f := st.Field(i)
				tag := f.Tag.Get("json")
				name, opts, _ := strings.Cut(tag, ",")
				if tag == "-" || !f.IsExported() && !f.Anonymous {
					continue
				}
				if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
					fields(f.Type)
					continue
				}
				if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
					t.Errorf("%s.%s: %q can leave the field out: send it, null when it has no value (tag %s:\"zero\")", typ, f.Name, tag, jsonx.NullTag)
				}
				if f.Tag.Get(jsonx.NullTag) == "zero" {
					nullable = append(nullable, name)
				}
			}
		}
		fields(typ)
		zero := reflect.New(typ).Elem().Interface()
		data, err := json.Marshal(zero)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		missing, err := jsonx.Missing(typ, data)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if len(missing) > 0 {
			t.Errorf("%s: its zero value leaves out %v: %s", typ, missing, data)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil {
			t.Errorf("%s: not an object: %s", typ, data)
			continue
		}
		for _, name := range nullable {
			if string(obj[name]) != "null" {
				t.Errorf("%s: %s is %s when zero, want null (a MarshalJSON calling jsonx.Marshal)", typ, name, obj[name])
			}
		}
	}
}

// statsOps answers GET /v1/retries/stats with the statistics it holds.
type statsOps struct {
	*store
	stats []recovery.RetryStats
}

func (o statsOps) RetryStats(context.Context) ([]recovery.RetryStats, error) { return o.stats, nil }

// TestRetryStatsJSON: GET /v1/retries/stats sends every field of a
// task's retry statistics under its key, and cancelled retries apart
// from succeeded ones: while the only retries are cancelled (someone
// else finished their instances), none succeeded and the success rate is
// null; once some ran, the rate counts those alone. The figures are
// those recovery's TestRetryStatsCancelledIsNotSuccess finds in the
// database.
func TestRetryStatsJSON(t *testing.T) {
	half := 0.5
	for _, tc := range []struct {
		name                 string
		stats                recovery.RetryStats
		cancelled, succeeded float64
		rate                 any
	}{
		{"no retry ran", recovery.RetryStats{Workflow: "orders", Task: "ship", Instances: 3, Failed: 1, Cancelled: 2}, 2, 0, nil},
		{"settled", recovery.RetryStats{Workflow: "orders", Task: "ship", Instances: 6, Retried: 2, Succeeded: 1, Failed: 2, Cancelled: 3,
			SuccessRate: &half}, 3, 1, 0.5},
	} {
		s := &store{}
		h := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Auth: tokenAuth("tok"), Ops: statsOps{s, []recovery.RetryStats{tc.stats}},
			Events: s.Events, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		req := httptest.NewRequest("GET", "/v1/retries/stats", nil)
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var ms []map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &ms); rec.Code != 200 || err != nil || len(ms) != 1 {
			t.Fatalf("%s: %d %v: %s", tc.name, rec.Code, err, rec.Body)
		}
		m := ms[0]
		for _, k := range []string{"workflow", "task", "instances", "retried", "scheduled", "manual", "waiting", "succeeded",
			"exhausted", "failed", "cancelled", "holds_open", "success_rate"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: stats JSON %v has no %q", tc.name, m, k)
			}
		}
		if m["cancelled"] != tc.cancelled || m["succeeded"] != tc.succeeded || m["success_rate"] != tc.rate {
			t.Errorf("%s: JSON %v, want cancelled %v, succeeded %v, success_rate %v", tc.name, m, tc.cancelled, tc.succeeded, tc.rate)
		}
	}
}
