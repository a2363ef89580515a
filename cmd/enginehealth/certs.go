package main

import (
	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
)

// watchCertificates returns the watch of the certificate files the
// daemon uses, each named by its key path: its expiry is a metric
// (enginehealth_certificate_expiry_seconds), in the status, and logged
// when it is within 7 days. A file without certificates (a setting not
// configured) is left out. Another file is one more line here.
func watchCertificates(cfg *configs.Config, o certexpiry.Options) *certexpiry.Watch {
	w := certexpiry.New(o)
	// The client certificate as it is presented now, the CAs as they
	// verify new connections now (a reload may swap either).
	w.Add("etcd.tls.cert_file", certexpiry.Chain, cfg.Etcd.ClientCert.Chain)
	w.Add("etcd.tls.ca_file", certexpiry.Roots, cfg.Etcd.CAs.Certs)
	// The API's, as served now (a reload swaps them).
	w.Add("api.tls.cert_file", certexpiry.Chain, cfg.API.ServerCert.Chain)
	w.Add("api.tls.client_ca_file", certexpiry.Roots, cfg.API.ClientCAs.Certs)
	if t := cfg.API.TLS; t != nil && t.CAFile != "" {
		w.Add("api.tls.ca_file", certexpiry.Roots, cfg.API.PeerCAs.Certs)
	}
	return w
}
