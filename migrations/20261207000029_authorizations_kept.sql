-- Issue 18: a payment is stored once. An EIP-3009 payment's own AuthorizationUsed is its
-- payments row's nonce and payer, which the refund rules now read there; and an
-- authorization whose transfer was dropped (someone else's EIP-3009 transfer on a busy
-- token) names nothing the store holds. From now on ingestion keeps an authorization only
-- when it released a kept transfer other than its payment's (a refund sent by EIP-3009,
-- whose nonce may name the payment it refunds); this drops the rows kept before that
-- this rule would not keep, so the refund rules read the same nonce for every stored
-- transfer as before.
DELETE FROM authorizations
WHERE NOT EXISTS (
    SELECT 1 FROM transfers t
    WHERE t.network = authorizations.network
      AND t.tx_id = authorizations.tx_id
      AND t.token = authorizations.token
      AND t.from_address = authorizations.authorizer
      AND t.event_index > authorizations.event_index
      AND NOT EXISTS (
          SELECT 1 FROM payments p
          WHERE p.network = t.network
            AND p.payment_id = t.tx_id
            AND p.event_index = t.event_index
            AND p.method = 'eip3009'
            AND p.payer = t.from_address
            AND p.asset = t.token
            AND p.nonce = authorizations.nonce
      )
);
