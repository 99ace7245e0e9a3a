-- Issue 18: an index holds what its query seeks by. An authorization's nonce is 32 random
-- bytes (EIP-3009), or a Permit2 nonce each payer uses once: the nonce alone finds the
-- payments of an authorization, and the payer and asset are checked on those few rows.
-- Keying the index by payer and asset too copied two addresses per payment.
DROP INDEX payments_by_authorization;
CREATE INDEX payments_by_authorization ON payments (network, nonce)
    WHERE nonce IS NOT NULL;
