package apitype

import (
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
	"github.com/enginehealth/enginehealth/nodes"
)

// Node is one engine node record: the items of GET /v1/nodes, GET
// /v1/nodes/{name} and the answer of POST /v1/nodes/{name}/ack.
type Node struct {
	Name                string       `json:"name"`
	Incarnation         string       `json:"incarnation"`
	PreviousIncarnation *string      `json:"previous_incarnation"`
	Hostname            string       `json:"hostname"`
	Status              nodes.Status `json:"status"`
	IsMaster            bool         `json:"is_master"`
	LastActive          time.Time    `json:"last_active"`
	ActiveSince         time.Time    `json:"active_since"`
	Version             string       `json:"version"`
	APIAddress          string       `json:"api_address"`
	// FailoverGrade is NORMAL, WARNING or ERROR; the grade outlives the
	// record (a clean restart keeps it).
	FailoverGrade string `json:"failover_grade"`
	// GradeChangedAt, GradeSignature (workflow/task/instance of the
	// interruption that caused it) and GradeReason of the last grade
	// change; null while the node was never graded.
	GradeChangedAt  *time.Time `json:"grade_changed_at"`
	GradeSignature  string     `json:"grade_signature" null:"zero"`
	GradeReason     string     `json:"grade_reason" null:"zero"`
	StatusChangedAt time.Time  `json:"status_changed_at"`
	StatusChangedBy string     `json:"status_changed_by"`
	StatusReason    string     `json:"status_reason"`
	// SecondsSinceActive is now − last_active on the database clock.
	SecondsSinceActive float64 `json:"seconds_since_active"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (n Node) MarshalJSON() ([]byte, error) { return jsonx.Marshal(n) }

// GradeChange is one change of a node's failover grade: the answer of
// POST /v1/nodes/{name}/reset-grade, and the grades a check pass changed.
type GradeChange struct {
	Name      string     `json:"name"`
	From      string     `json:"from"`
	To        string     `json:"to"`
	Signature *Signature `json:"signature"`
	Reason    string     `json:"reason"`
}

// Signature is the interruption that changed a grade.
type Signature struct {
	Workflow string `json:"workflow"`
	Task     string `json:"task"`
	Instance string `json:"instance"`
}

// NodeChange is one status change of a node made by the master (To is
// empty when it forgot the node).
type NodeChange struct {
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to"`
}

// AckRequest is the optional body of POST /v1/nodes/{name}/ack, of
// …/reset-grade, and of POST /v1/pause and /v1/resume.
type AckRequest struct {
	Reason string `json:"reason"`
}
