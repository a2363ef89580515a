{{/*
take_over: the columns a registration sets on the record of the
incarnation it replaces (an INSERT … ON CONFLICT's SET list; EXCLUDED is
the registration's row). Not a statement: given to register and restore
as their TakeOver slot.

No parameters.
*/ -}}
incarnation = EXCLUDED.incarnation,
		hostname = EXCLUDED.hostname,
		is_master = false,
		version = EXCLUDED.version,
		schema_version = EXCLUDED.schema_version,
		api_address = EXCLUDED.api_address,
		last_active = now(),
		active_since = now()
