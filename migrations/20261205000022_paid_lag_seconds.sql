-- How far `paid` lags the head in seconds (the head block's time minus the final block's),
-- recorded by the worker when it has both times; `paywatch status` shows it.
ALTER TABLE chain_heads ADD COLUMN paid_lag_secs BIGINT;
