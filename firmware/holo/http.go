package holo

import (
	"net/http"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/api"
)

// Routes returns the holo and servo endpoints. GET /holo, POST
// /holo/motion, GET /servos, POST /servos/move and POST /servos/release
// are served over the host link too; calibration and policy are not.
// Every servo action replies 200 with the Servos body.
func (c *Controller) Routes() []api.Route {
	h := func(f func(w http.ResponseWriter, r *http.Request) (int, any, error)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			status, v, err := f(w, r)
			if err != nil {
				api.WriteError(w, err)
				return
			}
			api.WriteJSON(w, status, v)
		})
	}
	return []api.Route{
		{Method: http.MethodGet, Path: "/holo", Link: true, Summary: "Holoprojector state",
			Handler: h(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
				return http.StatusOK, c.State(), nil
			})},
		{Method: http.MethodPost, Path: "/holo/motion", Link: true, Summary: "Start a holo motion or behaviour (202), or stop/off (200)",
			Prepare: c.prepareMotion, Handler: api.Prepared(c.prepareMotion)},
		{Method: http.MethodGet, Path: "/servos", Link: true, Summary: "Servo pulses, positions, calibration and drive policy",
			Handler: h(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
				return http.StatusOK, c.Servos(), nil
			})},
		{Method: http.MethodPost, Path: "/servos/move", Link: true, Summary: "Drive one servo to a pulse width",
			Handler: h(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
				var body struct {
					ID *string `json:"id"`
					US *int    `json:"us"`
				}
				if err := api.Decode(r, &body, false); err != nil {
					return 0, nil, err
				}
				if body.ID == nil || body.US == nil {
					return 0, nil, api.Errorf(api.ErrBadRequest, "id and us are required")
				}
				s, err := c.Move(*body.ID, *body.US)
				return http.StatusOK, s, err
			})},
		{Method: http.MethodPost, Path: "/servos/release", Link: true, Summary: "Stop driving a servo (pan, tilt or all)",
			Handler: h(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
				var body struct {
					ID *string `json:"id"`
				}
				if err := api.Decode(r, &body, false); err != nil {
					return 0, nil, err
				}
				if body.ID == nil {
					return 0, nil, api.Errorf(api.ErrBadRequest, "id is required (pan, tilt or all)")
				}
				s, err := c.Release(*body.ID)
				return http.StatusOK, s, err
			})},
		{Method: http.MethodPut, Path: "/servos/calibration", Summary: "Save a servo's calibration {min_us, max_us}",
			Handler: h(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
				id, err := c.queryID(r)
				if err != nil {
					return 0, nil, err
				}
				var body struct {
					MinUS *int `json:"min_us"`
					MaxUS *int `json:"max_us"`
				}
				if err := api.Decode(r, &body, false); err != nil {
					return 0, nil, err
				}
				if body.MinUS == nil || body.MaxUS == nil {
					return 0, nil, api.Errorf(api.ErrBadRequest, "min_us and max_us are required")
				}
				s, err := c.SetCalibration(id, Calibration{MinUS: *body.MinUS, MaxUS: *body.MaxUS})
				return http.StatusOK, s, err
			})},
		{Method: http.MethodDelete, Path: "/servos/calibration", Summary: "Forget a servo's calibration",
			Handler: h(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
				id, err := c.queryID(r)
				if err != nil {
					return 0, nil, err
				}
				s, err := c.ClearCalibration(id)
				return http.StatusOK, s, err
			})},
		{Method: http.MethodPut, Path: "/servos/policy", Summary: "Save a servo's drive policy {hold_at_ends, hold_between}",
			Handler: h(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
				id, err := c.queryID(r)
				if err != nil {
					return 0, nil, err
				}
				p := DefaultPolicy // a field left out takes its default
				if err := api.Decode(r, &p, false); err != nil {
					return 0, nil, err
				}
				s, err := c.SetPolicy(id, p)
				return http.StatusOK, s, err
			})},
	}
}

// queryID reads ?id= and checks it names a servo.
func (c *Controller) queryID(r *http.Request) (string, error) {
	id := r.URL.Query().Get("id")
	if id == "" {
		return "", api.Errorf(api.ErrBadRequest, "query id is required (pan or tilt)")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.axisLocked(id); err != nil {
		return "", err
	}
	return id, nil
}

// prepareMotion reads and checks a POST /holo/motion body, and that the
// horns can move for a motion that moves them; the change is Motion.
func (c *Controller) prepareMotion(r *http.Request) (api.Change, error) {
	var m boardapi.MotionRequest
	if err := api.Decode(r, &m, false); err != nil {
		return api.Change{}, err
	}
	if _, err := m.Validate(); err != nil {
		return api.Change{}, err
	}
	if m.Motion != boardapi.MotionStop && m.Motion != boardapi.MotionOff {
		c.mu.Lock()
		ok, reason := c.readyLocked()
		c.mu.Unlock()
		if !ok {
			return api.Change{}, &apiError{api.Errorf(api.ErrNotReady, "holo cannot move: %s", reason), ErrNotReady}
		}
	}
	return api.Change{Apply: func() (int, any, error) {
		st, err := c.Motion(m)
		return motionStatus(m.Motion), st, err
	}}, nil
}
