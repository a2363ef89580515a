package main

import (
	"testing"

	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/leadertest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

var (
	pg   *pgtest.Server
	etcd *etcdtest.Etcd
)

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int { return leadertest.Main(m, &pg, &etcd) })
}
