import { Hono } from 'hono';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import { ValidationError } from '../../errors.js';
import type { RuleChainService } from '../../rules/rule-chain-service.js';
import { RULE_CHAIN_SORT } from '../../rules/rule-chain-store.js';
import type { RuleEngine } from '../../rules/rule-engine.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import { type RequireUser, requireTenantAdmin } from './middleware.js';

/**
 * Rule chains on ThingsBoard's REST paths (rule-engine reference §1.5), mounted at `/api`, for
 * the tenant administrator only; plus `GET /ruleChains/stats`, the engine's per-chain counters
 * (queued, processed, failed, dropped, looped).
 */
export function ruleChainRoutes(deps: {
  chains: RuleChainService;
  engine: RuleEngine;
  requireUser: RequireUser;
}) {
  const { chains } = deps;
  const app = new Hono<HttpEnv>();
  const chainId = (raw: string | undefined) => requireUuid(raw, 'ruleChainId');
  const user = deps.requireUser;
  const admin = requireTenantAdmin;

  app.post('/ruleChain', user, admin, async (c) => c.json(chains.save(await readJson(c))));
  app.post('/ruleChain/metadata', user, admin, async (c) =>
    c.json(await chains.saveMetadata(await readJson(c))),
  );
  app.post('/ruleChain/import', user, admin, async (c) =>
    c.json(await chains.import(await readJson(c))),
  );
  app.get('/ruleChains/stats', user, admin, (c) => c.json(deps.engine.stats()));
  // ThingsBoard's bulk RuleChainData (reference §1.2): ids are rewritten inside the file.
  app.get('/ruleChains/export', user, admin, (c) => {
    const limit = Number(c.req.query('limit') ?? 100);
    if (!Number.isInteger(limit) || limit < 1)
      throw new ValidationError('limit must be a positive integer');
    return c.json(chains.exportAll(limit));
  });
  app.post('/ruleChains/import', user, admin, async (c) =>
    c.json(await chains.importAll(await readJson(c), c.req.query('overwrite') === 'true')),
  );
  app.get('/ruleChains', user, admin, (c) => {
    const query = queryRecord(c);
    return c.json(chains.list(query.type || 'CORE', parsePageQuery(query, RULE_CHAIN_SORT)));
  });
  app.get('/ruleChain/:id', user, admin, (c) => c.json(chains.get(chainId(c.req.param('id')))));
  app.get('/ruleChain/:id/metadata', user, admin, (c) =>
    c.json(chains.metadata(chainId(c.req.param('id')))),
  );
  app.get('/ruleChain/:id/output/labels', user, admin, (c) =>
    c.json(chains.outputLabels(chainId(c.req.param('id')))),
  );
  app.get('/ruleChain/:id/output/labels/usage', user, admin, (c) =>
    c.json(chains.outputLabelsUsage(chainId(c.req.param('id')))),
  );
  app.get('/ruleChain/:id/export', user, admin, (c) =>
    c.json(chains.export(chainId(c.req.param('id')))),
  );
  app.post('/ruleChain/:id/root', user, admin, (c) =>
    c.json(chains.makeRoot(chainId(c.req.param('id')))),
  );
  app.delete('/ruleChain/:id', user, admin, (c) => {
    chains.delete(chainId(c.req.param('id')));
    return c.body(null, 200);
  });
  return app;
}
