-- certmagic's storage on PostgreSQL (store_acme.go): the ACME account,
-- the certificates and their keys, the challenges in progress, and the
-- locks that let a fleet order once. On SQLite they are files in
-- --acme-cache beside the database.
CREATE TABLE acme_storage (
	key      text   PRIMARY KEY, -- certmagic's key, a path such as certificates/CA/NAME/NAME.crt
	value    bytea  NOT NULL,
	modified bigint NOT NULL     -- Unix milliseconds
);
CREATE TABLE acme_locks (
	name    text   PRIMARY KEY,
	owner   text   NOT NULL,     -- a random token of the holder
	expires bigint NOT NULL      -- Unix milliseconds of the database's clock: free after it
);
