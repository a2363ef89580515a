// Package systemd speaks the service manager's notify protocol (through
// go-systemd) and ships the unit file, enginehealth.service.
//
// Without NOTIFY_SOCKET (not started by systemd) every call is a no-op.
package systemd

import (
	"context"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends state changes to systemd.
type Notifier struct {
	log *slog.Logger
}

// NewNotifier returns a notifier logging through log.
func NewNotifier(log *slog.Logger) *Notifier {
	return &Notifier{log: log.With("component", "systemd")}
}

func (n *Notifier) send(state string) {
	sent, err := daemon.SdNotify(false, state)
	if err != nil {
		n.log.Warn("systemd notify failed", "state", state, slog.Any("err", err))
		return
	}
	if sent {
		n.log.Debug("systemd notified", "state", state)
	}
}

// Ready tells systemd that start-up is finished (READY=1).
func (n *Notifier) Ready() { n.send(daemon.SdNotifyReady) }

// Stopping tells systemd that shutdown has begun (STOPPING=1).
func (n *Notifier) Stopping() { n.send(daemon.SdNotifyStopping) }

// Status sets the one-line status shown by systemctl status.
func (n *Notifier) Status(s string) { n.send("STATUS=" + s) }

// Watchdog pings systemd's watchdog (WATCHDOG=1) at half its period while
// healthy returns nil, until ctx is done. With no watchdog configured
// (WatchdogSec unset) it returns at once. A sick daemon stops pinging, so
// systemd restarts it.
func (n *Notifier) Watchdog(ctx context.Context, healthy func() error) error {
	period, err := daemon.SdWatchdogEnabled(false)
	if err != nil || period <= 0 {
		return nil
	}
	t := time.NewTicker(period / 2)
	defer t.Stop()
	for {
		if err := healthy(); err != nil {
			n.log.WarnContext(ctx, "not pinging the systemd watchdog", slog.Any("err", err))
		} else {
			n.send(daemon.SdNotifyWatchdog)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
