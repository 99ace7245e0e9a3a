-- Issue 18: a fact stored once. Most history rows were caused by their payment's own
-- transaction (seen, final, reorged…), whose hash is the row's payment_id: their tx_id is
-- now left empty (NULL), and readers read COALESCE(tx_id, payment_id). A row caused by
-- another transaction (a refund's) keeps its hash. tx_id was never written empty before.
UPDATE payment_history SET tx_id = NULL WHERE tx_id = payment_id;
