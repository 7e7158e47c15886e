import { useState } from 'preact/hooks';
import { ErrorText, useAction } from '../components/ui.js';
import { api } from '../lib/api.js';

/**
 * "Forgot password?" of the sign-in page (docs/users.md "Password reset"): asks the gateway to
 * mail a reset link (ThingsBoard's `POST /api/noauth/resetPasswordByEmail`). The answer never
 * tells whether the address has an account; the link opens the reset form.
 */
export function ForgotPasswordPage() {
  const act = useAction();
  const [sent, setSent] = useState('');
  const submit = (e: Event) => {
    e.preventDefault();
    const email = String(new FormData(e.currentTarget as HTMLFormElement).get('email'));
    void act
      .run(() => api('/api/noauth/resetPasswordByEmail', { body: { email } }))
      .then((ok) => ok && setSent(email));
  };
  return (
    <form onSubmit={submit} class="card stack" aria-label="Reset password">
      <h1>Reset password</h1>
      <p>Enter the email of your account: the gateway mails you a link to set a new password.</p>
      <label>
        Email
        <input name="email" type="email" autocomplete="username" required />
      </label>
      <button type="submit" class="primary" disabled={act.busy}>
        Send reset link
      </button>
      <ErrorText error={act.error} />
      <output aria-live="polite">
        {sent &&
          `If ${sent} belongs to an account, a mail with a reset link is on its way. It works once, for 24 hours.`}
      </output>
      <a href="/">Back to sign in</a>
    </form>
  );
}
