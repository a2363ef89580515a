package leasefile

import (
	"testing"

	"github.com/enginehealth/enginehealth/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m, nil) }
