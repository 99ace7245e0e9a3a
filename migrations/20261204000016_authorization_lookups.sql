-- A resource server or facilitator whose settlement timed out asks by authorization:
-- (network, asset, payer, nonce). Payments are found by it from this index; payments
-- with no nonce (Solana) are left out of it.
CREATE INDEX payments_by_authorization ON payments (network, payer, nonce, asset)
    WHERE nonce IS NOT NULL;
