package boardapi

// MaxShowLoops bounds loops in a screen show request.
const MaxShowLoops = 10000

// ShowRequest is the body of POST /screen/show and the screen part of a
// scene. Exactly one of Path, Colour or Calibration (true) is given.
type ShowRequest struct {
	Path        *string `json:"path,omitempty" doc:"a clip or image on the volume"`
	Loop        *bool   `json:"loop,omitempty" doc:"true: play forever; false: play once"`
	Loops       *int    `json:"loops,omitempty" doc:"play this many times (1-10000)"`
	Colour      *string `json:"colour,omitempty" doc:"#rrggbb, R,G,B or a colour name"`
	Calibration *bool   `json:"calibration,omitempty" doc:"true: the calibration crosshair"`
}

// Check validates the request's shape without touching any file: one of
// path, colour or calibration; loop and loops only with a path and not
// contradicting each other; loops 1-MaxShowLoops; a colour that parses; a
// path that follows the volume's path rules (CleanPath). Errors are 400
// bad_request, bad_path or is_a_directory.
func (r ShowRequest) Check() error {
	n := 0
	for _, set := range []bool{r.Path != nil, r.Colour != nil, r.Calibration != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return Errorf(ErrBadRequest, "give one of path, colour or calibration")
	case n > 1:
		return Errorf(ErrBadRequest, "give only one of path, colour or calibration")
	case r.Calibration != nil && !*r.Calibration:
		return Errorf(ErrBadRequest, "calibration must be true (show something else to leave it)")
	case r.Path == nil && (r.Loop != nil || r.Loops != nil):
		return Errorf(ErrBadRequest, "loop and loops go with a path")
	case r.Loops != nil && (*r.Loops < 1 || *r.Loops > MaxShowLoops):
		return Errorf(ErrBadRequest, "loops must be 1-%d, not %d", MaxShowLoops, *r.Loops)
	case r.Loops != nil && r.Loop != nil && *r.Loop:
		return Errorf(ErrBadRequest, "loop true plays forever; it does not go with loops")
	}
	if r.Colour != nil {
		if _, err := ParseColour(*r.Colour); err != nil {
			return Errorf(ErrBadRequest, "colour %q: want #rrggbb, R,G,B (each 0-255) or a colour name", *r.Colour)
		}
	}
	if r.Path != nil {
		if _, err := CleanPath(*r.Path); err != nil {
			return err
		}
		if *r.Path == "/" {
			return Errorf(ErrIsADirectory, "/ is a directory")
		}
	}
	return nil
}

// Plays is how many times a clip shown by r plays, 0 for forever. With
// neither loop nor loops it is 1 when onceByDefault, else 0.
func (r ShowRequest) Plays(onceByDefault bool) int {
	switch {
	case r.Loops != nil:
		return *r.Loops
	case r.Loop != nil && *r.Loop:
		return 0
	case r.Loop != nil:
		return 1
	case onceByDefault:
		return 1
	}
	return 0
}
