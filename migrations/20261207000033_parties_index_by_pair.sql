-- Issue 18: an index holds what its queries seek by. Every query of payments_by_parties
-- asks for one refund route's pair — a seller (pay_to) and its payer — and checks the
-- asset, state and order on the pair's rows, which are few; keying the index by the
-- asset and block too copied an address and a number per payment.
DROP INDEX payments_by_parties;
CREATE INDEX payments_by_parties ON payments (network, pay_to, payer);
