package metrics

import (
	"testing"

	"github.com/enginehealth/enginehealth/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m, func(m *testing.M) int { return m.Run() }) }
