-- expand: a new column with a default; servers before it ignore it (and send to every environment's endpoints meanwhile)
-- Each webhook endpoint belongs to one environment (production or
-- staging), as keys and admin tokens do: a server or a command sees, and
-- sends to, only its own environment's endpoints. Those made before
-- belong to production.
ALTER TABLE webhook_endpoints ADD COLUMN env text NOT NULL DEFAULT 'production';
