-- The webhook ledger. A record reads the endpoint's state, moves it (xjobs.contract.webhooks
-- next_state), appends the attempt and trims the endpoint's attempts, in one write transaction.

-- name: webhook_state
select failures, disabled_at_ms from webhook_endpoints where endpoint = :endpoint;

-- name: webhook_state_put
insert into webhook_endpoints (endpoint, failures, disabled_at_ms)
values (:endpoint, :failures, :disabled_at_ms)
on conflict (endpoint) do update
set failures = excluded.failures, disabled_at_ms = excluded.disabled_at_ms;

-- name: webhook_attempt_add
insert into webhook_attempts (endpoint, message_id, job_id, attempt, status, http_status,
                              latency_ms, excerpt, error, at_ms)
values (:endpoint, :message_id, :job_id, :attempt, :status, :http_status, :latency_ms, :excerpt,
        :error, :at_ms);

-- name: webhook_trim
-- Keep the endpoint's newest :keep attempts.
delete from webhook_attempts
where endpoint = :endpoint
  and seq <= (select a.seq from webhook_attempts a where a.endpoint = :endpoint
              order by a.seq desc limit 1 offset :keep);

-- name: webhook_enable
update webhook_endpoints set failures = 0, disabled_at_ms = null where endpoint = :endpoint;

-- name: webhook_attempts
select endpoint, message_id, job_id, attempt, status, http_status, latency_ms, excerpt, error, at_ms
from webhook_attempts
where endpoint = :endpoint
order by seq desc
limit :limit;
