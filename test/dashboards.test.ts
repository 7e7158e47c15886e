import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

interface DashboardJson {
  id: { entityType: string; id: string };
  createdTime: number;
  tenantId: { entityType: string; id: string };
  title: string;
  name: string;
  image: string | null;
  mobileHide: boolean;
  mobileOrder: number | null;
  assignedCustomers: Array<{ customerId: { entityType: string; id: string }; title: string }>;
  configuration?: Record<string, unknown> | null;
  version: number;
}
interface Page<T> {
  data: T[];
  totalPages: number;
  totalElements: number;
  hasNext: boolean;
}

const WIDGET_ID = '9a4f1c2e-1111-4c3b-8a5e-0c1d2e3f4a5b';
const ALIAS_ID = '6b2c3d4e-2222-4f5a-9b6c-7d8e9f0a1b2c';

/** A small dashboard in ThingsBoard's JSON (platform.md §5). */
function thermostats(title = 'Thermostats'): Record<string, unknown> {
  return {
    title,
    image: null,
    mobileHide: false,
    mobileOrder: 1,
    configuration: {
      description: 'All thermostats',
      widgets: {
        [WIDGET_ID]: {
          id: WIDGET_ID,
          typeFullFqn: 'system.cards.entities_table',
          type: 'latest',
          sizeX: 8,
          sizeY: 5,
          config: {
            title: 'Thermostats',
            datasources: [
              {
                type: 'entity',
                entityAliasId: ALIAS_ID,
                dataKeys: [{ name: 'temperature', type: 'timeseries', label: 'Temperature' }],
              },
            ],
          },
        },
      },
      states: {
        default: {
          name: 'Thermostats',
          root: true,
          layouts: { main: { widgets: { [WIDGET_ID]: { sizeX: 12, sizeY: 6, row: 0, col: 0 } } } },
        },
        details: { name: '${entityName}', root: false, layouts: { main: { widgets: {} } } },
      },
      entityAliases: {
        [ALIAS_ID]: {
          id: ALIAS_ID,
          alias: 'Thermostats',
          filter: { type: 'deviceType', resolveMultiple: true, deviceTypes: ['thermostat'] },
        },
      },
      filters: {},
      timewindow: { selectedTab: 0, realtime: { realtimeType: 0, timewindowMs: 60000 } },
      settings: { stateControllerId: 'entity', showTitle: false },
      futureField: { kept: true },
    },
  };
}

describe('dashboards REST API', () => {
  let t: TestGateway;
  let admin: string;
  const save = (body: unknown, token = admin) => t.api('/api/dashboard', { body, token });
  const create = async (body: unknown): Promise<DashboardJson> => {
    const res = await save(body);
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as DashboardJson;
  };

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  describe('create, read, update, delete', () => {
    let d: DashboardJson;

    it('creates a dashboard and returns it with name = title and the configuration as sent', async () => {
      d = await create(thermostats());
      assert.equal(d.id.entityType, 'DASHBOARD');
      assert.match(d.id.id, /^[0-9a-f-]{36}$/);
      assert.equal(d.tenantId.entityType, 'TENANT');
      assert.equal(d.title, 'Thermostats');
      assert.equal(d.name, 'Thermostats');
      assert.equal(d.mobileOrder, 1);
      assert.equal(d.mobileHide, false);
      assert.deepEqual(d.assignedCustomers, []);
      assert.equal(d.version, 1);
      assert.ok(d.createdTime > 0);
      assert.deepEqual(d.configuration, thermostats().configuration);
    });

    it('gets the dashboard, and its info without the configuration', async () => {
      const got = await t.api(`/api/dashboard/${d.id.id}`, { token: admin });
      assert.equal(got.status, 200);
      assert.deepEqual(await got.json(), d);
      const info = await t.api(`/api/dashboard/info/${d.id.id}`, { token: admin });
      assert.equal(info.status, 200);
      const body = (await info.json()) as DashboardJson;
      assert.equal('configuration' in body, false);
      assert.equal(body.title, 'Thermostats');
    });

    it('updates by id, counts the version and refuses a stale version with 409', async () => {
      const upd = await create({ ...thermostats('Thermostats v2'), id: d.id, version: 1 });
      assert.equal(upd.id.id, d.id.id);
      assert.equal(upd.name, 'Thermostats v2');
      assert.equal(upd.version, 2);
      assert.equal(upd.createdTime, d.createdTime);
      const stale = await save({ ...thermostats('lost update'), id: d.id, version: 1 });
      assert.equal(stale.status, 409);
      assert.match(((await stale.json()) as { message: string }).message, /already changed/);
      // Without a version the save is unconditional.
      assert.equal((await create({ title: 'No config', id: d.id })).configuration, null);
    });

    it('answers 404 for an unknown id and 400 for a malformed one', async () => {
      const unknown = randomUUID();
      assert.equal((await t.api(`/api/dashboard/${unknown}`, { token: admin })).status, 404);
      assert.equal((await t.api(`/api/dashboard/info/${unknown}`, { token: admin })).status, 404);
      assert.equal((await save({ title: 'x', id: { id: unknown } })).status, 404);
      assert.equal(
        (await t.api(`/api/dashboard/${unknown}`, { method: 'DELETE', token: admin })).status,
        404,
      );
      assert.equal((await t.api('/api/dashboard/not-a-uuid', { token: admin })).status, 400);
    });

    it('deletes a dashboard', async () => {
      const del = await t.api(`/api/dashboard/${d.id.id}`, { method: 'DELETE', token: admin });
      assert.equal(del.status, 200);
      assert.equal((await t.api(`/api/dashboard/${d.id.id}`, { token: admin })).status, 404);
    });
  });

  describe('validation', () => {
    const refused = async (body: unknown, pattern: RegExp, status = 400) => {
      const res = await save(body);
      const text = await res.text();
      assert.equal(res.status, status, text);
      assert.match((JSON.parse(text) as { message: string }).message, pattern);
    };
    const withConfig = (patch: Record<string, unknown>) => {
      const base = thermostats();
      return { ...base, configuration: { ...(base.configuration as object), ...patch } };
    };

    it('requires a title', async () => {
      await refused({ configuration: {} }, /title/);
      await refused({ title: '   ' }, /Dashboard title should be specified/);
    });

    it('requires configuration to be an object when present', async () => {
      await refused({ title: 'x', configuration: 'widgets' }, /configuration/);
      await refused({ title: 'x', configuration: [] }, /configuration/);
      assert.equal((await save({ title: 'no configuration' })).status, 200);
      assert.equal((await save({ title: 'null configuration', configuration: null })).status, 200);
    });

    it('requires exactly one root state', async () => {
      await refused(
        withConfig({ states: { a: { name: 'A', root: true }, b: { name: 'B', root: true } } }),
        /configuration\.states: exactly one state must have "root": true, found 2 \(a, b\)/,
      );
      await refused(
        withConfig({ states: { a: { name: 'A', root: false } } }),
        /exactly one state .* found none/,
      );
      await refused(withConfig({ states: { a: 'state' } }), /configuration\.states\.a/);
    });

    it('takes widgets as a map or an array (old exports), nothing else', async () => {
      await refused(withConfig({ widgets: 'w' }), /configuration\.widgets: must be a map/);
      await refused(withConfig({ widgets: [1, 2] }), /configuration\.widgets/);
      const arr = await create(withConfig({ widgets: [{ id: WIDGET_ID, sizeX: 4 }] }));
      assert.deepEqual((arr.configuration as { widgets: unknown }).widgets, [
        { id: WIDGET_ID, sizeX: 4 },
      ]);
    });

    it('requires a filter type on every entity alias', async () => {
      await refused(
        withConfig({ entityAliases: { a1: { id: 'a1', alias: 'A' } } }),
        /configuration\.entityAliases\.a1\.filter/,
      );
      await refused(
        withConfig({ entityAliases: { a1: { id: 'a1', alias: 'A', filter: { type: '' } } } }),
        /configuration\.entityAliases\.a1\.filter\.type/,
      );
    });

    it('refuses bad JSON, bad field types and documents nested too deeply', async () => {
      await refused('{"title":', /Invalid JSON body/);
      await refused({ title: 'x', mobileOrder: 1.5 }, /mobileOrder/);
      await refused({ title: 'x', mobileHide: 'yes' }, /mobileHide/);
      let deep: Record<string, unknown> = {};
      for (let i = 0; i < 100; i++) deep = { nested: deep };
      await refused({ title: 'deep', configuration: { settings: deep } }, /nested deeper/);
    });

    it('accepts a dashboard above the global body limit, refuses one above 1 MiB with 413', async () => {
      // The global /api limit is 64 KiB by default; dashboards have their own.
      const big = withConfig({ description: 'x'.repeat(200 * 1024) });
      assert.equal((await save(big)).status, 200);
      await refused(
        withConfig({ description: 'x'.repeat(1024 * 1024) }),
        /at most 1048576 bytes/,
        413,
      );
      await refused(
        withConfig({ description: 'x'.repeat(1200 * 1024) }),
        /Dashboard request is larger than/,
        413,
      );
    });
  });

  describe('tenant list', () => {
    let t2: TestGateway;
    let token: string;
    before(async () => {
      t2 = await startGateway();
      token = await t2.adminToken();
      for (const title of ['Boilers', 'Pumps', 'Chillers', 'Pump house', 'Meters']) {
        const res = await t2.api('/api/dashboard', {
          body: { ...thermostats(title), mobileHide: title === 'Meters' },
          token,
        });
        assert.equal(res.status, 200);
      }
    });
    after(() => t2.close());
    const page = async (q: string) => {
      const res = await t2.api(`/api/tenant/dashboards?${q}`, { token });
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()) as Page<DashboardJson>;
    };

    it('pages DashboardInfos (no configuration) in creation order by default', async () => {
      const p0 = await page('pageSize=2&page=0');
      assert.equal(p0.totalElements, 5);
      assert.equal(p0.totalPages, 3);
      assert.equal(p0.hasNext, true);
      assert.deepEqual(
        p0.data.map((d) => d.title),
        ['Boilers', 'Pumps'],
      );
      assert.equal('configuration' in (p0.data[0] as object), false);
      const p2 = await page('pageSize=2&page=2');
      assert.deepEqual(
        p2.data.map((d) => d.title),
        ['Meters'],
      );
      assert.equal(p2.hasNext, false);
    });

    it('sorts by title and searches case-insensitively', async () => {
      const sorted = await page('pageSize=10&page=0&sortProperty=title&sortOrder=DESC');
      assert.deepEqual(
        sorted.data.map((d) => d.title),
        ['Pumps', 'Pump house', 'Meters', 'Chillers', 'Boilers'],
      );
      const found = await page('pageSize=10&page=0&textSearch=PUMP&sortProperty=name');
      assert.deepEqual(
        found.data.map((d) => d.title),
        ['Pump house', 'Pumps'],
      );
      assert.equal(found.totalElements, 2);
    });

    it('leaves out dashboards hidden on mobile with mobile=true', async () => {
      const mobile = await page('pageSize=10&page=0&mobile=true');
      assert.equal(mobile.totalElements, 4);
      assert.ok(!mobile.data.some((d) => d.title === 'Meters'));
    });

    it('refuses bad paging parameters with 400', async () => {
      for (const q of ['page=0', 'pageSize=10', 'pageSize=10&page=0&sortProperty=color']) {
        const res = await t2.api(`/api/tenant/dashboards?${q}`, { token });
        assert.equal(res.status, 400, q);
      }
    });
  });

  describe('customer assignment and access', () => {
    let acme: string;
    let globex: string;
    let acmeUser: string;
    let globexUser: string;
    let shared: DashboardJson;
    let internal: DashboardJson;

    before(async () => {
      acme = await createCustomer(t, 'Acme');
      globex = await createCustomer(t, 'Globex');
      acmeUser = await activateUser(t, await createUser(t, 'user@acme.test', acme), 'acme-pass-1');
      globexUser = await activateUser(
        t,
        await createUser(t, 'user@globex.test', globex),
        'globex-pass-1',
      );
      shared = await create(thermostats('Shared'));
      internal = await create(thermostats('Internal'));
    });
    const assign = (customerId: string, dashboardId: string, method = 'POST', token = admin) =>
      t.api(`/api/customer/${customerId}/dashboard/${dashboardId}`, { method, token });

    it('assigns a dashboard to several customers (idempotent) and shows them', async () => {
      assert.equal((await assign(acme, shared.id.id)).status, 200);
      const again = await assign(acme, shared.id.id);
      assert.equal(again.status, 200);
      const res = await assign(globex, shared.id.id);
      assert.equal(res.status, 200);
      const d = (await res.json()) as DashboardJson;
      assert.deepEqual(
        d.assignedCustomers.map((a) => [a.customerId.entityType, a.customerId.id, a.title]),
        [
          ['CUSTOMER', acme, 'Acme'],
          ['CUSTOMER', globex, 'Globex'],
        ],
      );
      const info = (await (
        await t.api(`/api/dashboard/info/${shared.id.id}`, { token: admin })
      ).json()) as DashboardJson;
      assert.equal(info.assignedCustomers.length, 2);
    });

    it('lists the dashboards of a customer', async () => {
      const res = await t.api(`/api/customer/${acme}/dashboards?pageSize=10&page=0`, {
        token: admin,
      });
      assert.equal(res.status, 200);
      const page = (await res.json()) as Page<DashboardJson>;
      assert.deepEqual(
        page.data.map((d) => d.title),
        ['Shared'],
      );
      assert.equal(page.totalElements, 1);
    });

    it('answers 404 for an unknown customer or dashboard', async () => {
      const nobody = randomUUID();
      assert.equal((await assign(nobody, shared.id.id)).status, 404);
      assert.equal((await assign(nobody, shared.id.id, 'DELETE')).status, 404);
      assert.equal((await assign(acme, randomUUID())).status, 404);
      const list = await t.api(`/api/customer/${nobody}/dashboards?pageSize=10&page=0`, {
        token: admin,
      });
      assert.equal(list.status, 404);
      assert.match(((await list.json()) as { message: string }).message, /Customer/);
    });

    it('lets a customer user read dashboards assigned to its customer only (404 otherwise)', async () => {
      const got = await t.api(`/api/dashboard/${shared.id.id}`, { token: acmeUser });
      assert.equal(got.status, 200);
      assert.equal(((await got.json()) as DashboardJson).title, 'Shared');
      const info = await t.api(`/api/dashboard/info/${shared.id.id}`, { token: acmeUser });
      assert.equal(info.status, 200);
      const hidden = await t.api(`/api/dashboard/${internal.id.id}`, { token: acmeUser });
      assert.equal(hidden.status, 404);
      const missing = await t.api(`/api/dashboard/${randomUUID()}`, { token: acmeUser });
      assert.equal(missing.status, 404);
      // The same message for both: the response does not tell whether the id exists.
      assert.match(((await hidden.json()) as { message: string }).message, /is not found/);
      assert.equal(
        (await t.api(`/api/dashboard/info/${internal.id.id}`, { token: acmeUser })).status,
        404,
      );
    });

    it('lets a customer user list its own customer dashboards, not another customer', async () => {
      const own = await t.api(`/api/customer/${acme}/dashboards?pageSize=10&page=0`, {
        token: acmeUser,
      });
      assert.equal(own.status, 200);
      const other = await t.api(`/api/customer/${acme}/dashboards?pageSize=10&page=0`, {
        token: globexUser,
      });
      assert.equal(other.status, 404);
    });

    it('refuses writes and the tenant list to a customer user with 403', async () => {
      assert.equal((await save(thermostats('mine'), acmeUser)).status, 403);
      assert.equal(
        (await t.api(`/api/dashboard/${shared.id.id}`, { method: 'DELETE', token: acmeUser }))
          .status,
        403,
      );
      assert.equal(
        (await t.api('/api/tenant/dashboards?pageSize=10&page=0', { token: acmeUser })).status,
        403,
      );
      assert.equal((await assign(acme, internal.id.id, 'POST', acmeUser)).status, 403);
      assert.equal((await assign(acme, shared.id.id, 'DELETE', acmeUser)).status, 403);
    });

    it('refuses requests without a token with 401', async () => {
      assert.equal((await t.api(`/api/dashboard/${shared.id.id}`)).status, 401);
      assert.equal((await t.api('/api/dashboard', { body: thermostats() })).status, 401);
      assert.equal((await t.api('/api/tenant/dashboards?pageSize=1&page=0')).status, 401);
    });

    it('unassigns (idempotent); the customer user then gets 404', async () => {
      const res = await assign(acme, shared.id.id, 'DELETE');
      assert.equal(res.status, 200);
      const d = (await res.json()) as DashboardJson;
      assert.deepEqual(
        d.assignedCustomers.map((a) => a.title),
        ['Globex'],
      );
      assert.equal((await assign(acme, shared.id.id, 'DELETE')).status, 200);
      assert.equal(
        (await t.api(`/api/dashboard/${shared.id.id}`, { token: acmeUser })).status,
        404,
      );
      assert.equal(
        (await t.api(`/api/dashboard/${shared.id.id}`, { token: globexUser })).status,
        200,
      );
    });

    it('drops assignments with the dashboard or the customer', async () => {
      assert.equal((await assign(acme, internal.id.id)).status, 200);
      t.gw.db.prepare('DELETE FROM customer WHERE id = ?').run(acme);
      const info = (await (
        await t.api(`/api/dashboard/info/${internal.id.id}`, { token: admin })
      ).json()) as DashboardJson;
      assert.deepEqual(info.assignedCustomers, []);
      await t.api(`/api/dashboard/${shared.id.id}`, { method: 'DELETE', token: admin });
      const left = t.gw.db
        .prepare('SELECT count(*) AS n FROM dashboard_customer WHERE dashboard_id = ?')
        .get(shared.id.id) as { n: number };
      assert.equal(left.n, 0);
    });
  });
});
